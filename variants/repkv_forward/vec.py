"""vec: one thread per 4/8/16-byte word of out, a vectorized gather (each K/V word is read
nrep times, once per replica)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from variants.dtypes import DType
from variants.family import (
    BLOCK_SIZES,
    LOAD_HINTS,
    MAX_GRID,
    STORE_HINTS,
    Family,
    GridTerm,
    Launch,
    Param,
    ceil_div,
    hint_codes,
    index_type,
    vector_reject,
)
from variants.repkv_forward.layout import out_numel, out_token_elements
from variants.shape import Shape

VEC_BYTES = (4, 8, 16)


class VecFamily(Family):
    name = "vec"
    doc = "one thread per vector word of out: a vectorized gather"
    params = (
        Param("block", BLOCK_SIZES, "threads per block"),
        Param("vec_bytes", VEC_BYTES, "bytes per load and store"),
        Param("load", LOAD_HINTS, "global load: plain, __ldg or __ldcs"),
        Param("store", STORE_HINTS, "global store: plain or __stcs"),
    )
    kernel_prefix = "repkv_forward"
    template_dir = Path(__file__).resolve().parent

    def token_words(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> int:
        """Threads per token: words of out (`replicate`: of inp)."""
        return out_token_elements(shape) * dtype.itemsize // p["vec_bytes"]

    def reject(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> str | None:
        reason = vector_reject(shape, dtype, p["vec_bytes"])
        if reason is None and self.launch(shape, dtype, p, 0).grid > MAX_GRID:
            reason = f"{self.launch(shape, dtype, p, 0).grid} blocks of {p['block']} exceed CUDA's grid"
        return reason

    def template_args(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> list[str]:
        # out is the larger tensor (3*NH >= NH + 2*NH_KV heads): its element count bounds every
        # word offset of either tensor; the threads bound the flat thread index.
        threads = self.launch(shape, dtype, p, 0).grid * p["block"]
        largest = max(threads, out_numel(shape))
        return [dtype.ctype, str(p["vec_bytes"]), *hint_codes(p), index_type(largest)]

    def launch(self, shape: Shape, dtype: DType, p: Mapping[str, Any], sm_count: int) -> Launch:
        return Launch(ceil_div(shape.tokens * self.token_words(shape, dtype, p), p["block"]), p["block"])

    def grid_terms(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> tuple[GridTerm, ...]:
        return (GridTerm(1, self.token_words(shape, dtype, p), p["block"]),)


FAMILY = VecFamily()
