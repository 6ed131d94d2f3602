"""flat: Inductor's kernel in CUDA: a 1-D grid over dinp's words with the head layout compiled
in, so a word's (token, head, offset) costs multiplies, not divisions; `vec`'s layout without
its runtime index math."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from variants.dtypes import DType
from variants.family import (
    INT32_MAX,
    LOAD_HINTS,
    MAX_GRID,
    STORE_HINTS,
    Family,
    GridTerm,
    Launch,
    Param,
    grid_size,
    hint_codes,
    index_type,
    vector_reject,
    vector_words,
)
from variants.shape import Shape


class Flat(Family):
    name = "flat"
    doc = "one thread per WORDS words of dinp, as Inductor's kernel; the head layout compiled in"
    params = (
        # 1024 is left out: __launch_bounds__(1024) caps a thread at 64 registers, too few for
        # several 16-byte words of replicas in flight.
        Param("block", (64, 128, 256, 512), "threads per block (a template argument)"),
        Param("vec_bytes", (4, 8, 16), "bytes per load and store"),
        Param("words", (1, 2), "dinp words per thread, BLOCK apart (their loads in flight together)"),
        Param("load", LOAD_HINTS, "global load: plain, __ldg or __ldcs"),
        Param("store", STORE_HINTS, "global store: plain or __stcs"),
    )

    def reject(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> str | None:
        reason = vector_reject(shape, dtype, p["vec_bytes"])
        if reason:
            return reason
        row = 3 * shape.NH * vector_words(shape, dtype, p["vec_bytes"])
        if row > INT32_MAX:  # flat.cu's 3*NH*HDV and HEADS*HDV are int constants
            return f"a token's dout row of {row} words is past flat's 32-bit indices within a token"
        if self.launch(shape, dtype, p, 0).grid > MAX_GRID:
            return (
                f"{shape.tokens} tokens in blocks of {p['block'] * p['words']} words need over 2^31-1 blocks"
            )
        return None

    def template_args(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> list[str]:
        grid = self.launch(shape, dtype, p, 0).grid
        elements = p["vec_bytes"] // dtype.itemsize
        # the largest index: a word of dout, a thread's word past dinp's end, or the dout word
        # that a word of the token past the end would read (computed, never loaded)
        largest = max(
            shape.dout_numel,
            grid * p["block"] * p["words"] * elements,
            (shape.tokens + 1) * 3 * shape.NH * shape.HD,
        )
        return [
            dtype.ctype,
            str(p["vec_bytes"]),
            str(vector_words(shape, dtype, p["vec_bytes"])),
            str(shape.heads_in),
            str(shape.nrep),
            str(p["block"]),
            str(p["words"]),
            *hint_codes(p),
            index_type(largest),
        ]

    def launch(self, shape: Shape, dtype: DType, p: Mapping[str, Any], sm_count: int) -> Launch:
        return Launch(grid_size(self.grid_terms(shape, dtype, p), shape.tokens), p["block"])

    def grid_terms(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> tuple[GridTerm, ...]:
        words_per_token = shape.heads_in * vector_words(shape, dtype, p["vec_bytes"])
        return (GridTerm(1, words_per_token, p["block"] * p["words"]),)


FAMILY = Flat()
