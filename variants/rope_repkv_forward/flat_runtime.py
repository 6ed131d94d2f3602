"""flat_runtime: flat with the head layout read at run time, so one instantiation serves every
layout (what the exported header launches for a layout nobody tuned): WORDS words of inp a
thread, BLOCK apart; each q/k word rotated once, then stored to its replicas."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from variants.dtypes import DType
from variants.family import INT32_MAX, GridTerm, Launch, grid_size, hint_codes, index_type
from variants.layout_family import LAYOUT_PARAMS
from variants.rope_repkv_forward.rope import RopeVec, qkv_numel
from variants.shape import Shape

# A thread steps from its first word to the next in 32 bits: a token's row of words plus the
# thread's span (at most 1024 words) must stay in an int.
ROW_LIMIT = INT32_MAX - 1024


class FlatRuntime(RopeVec):
    name = "flat_runtime"
    doc = "WORDS words of inp a thread, the head layout at run time: one load and rotation, nrep stores"
    kernel_prefix = "rope_repkv_forward"
    template_dir = Path(__file__).resolve().parent
    params = LAYOUT_PARAMS

    def reject(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> str | None:
        reason = self.vector_rule(shape, dtype, p["vec_bytes"])
        if reason:
            return reason
        if p["block"] * p["words"] > 1024:
            return f"{p['block']} threads of {p['words']} words: at most 1024 words a block"
        if 3 * shape.NH * shape.HD > ROW_LIMIT:
            return f"a token's {3 * shape.NH * shape.HD} elements are past flat_runtime's 32-bit steps"
        if shape.tokens > INT32_MAX:  # a token's position t = token % T is taken in int
            return f"{shape.tokens} tokens are past flat_runtime's 32-bit token index"
        return super().reject(shape, dtype, p)  # the grid's limit

    def template_args(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> list[str]:
        # the largest index: a thread's last word, or an element offset of the larger tensor
        largest = max(self.launch(shape, dtype, p, 0).grid * p["block"] * p["words"], qkv_numel(shape))
        return [
            dtype.ctype,
            str(p["vec_bytes"]),
            str(p["block"]),
            str(p["words"]),
            *hint_codes(p),
            index_type(largest),
        ]

    def launch(self, shape: Shape, dtype: DType, p: Mapping[str, Any], sm_count: int) -> Launch:
        return Launch(grid_size(self.grid_terms(shape, dtype, p), shape.tokens), p["block"])

    def grid_terms(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> tuple[GridTerm, ...]:
        return (GridTerm(1, self.token_words(shape, dtype, p), p["block"] * p["words"]),)


FAMILY = FlatRuntime()
