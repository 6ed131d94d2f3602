"""warp_per_head: one warp per (token, dinp head), lanes across HD with vector words."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from variants.dtypes import DType
from variants.family import (
    LOAD_HINTS,
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
from variants.shape import Shape
from variants.word_family import VEC_BYTES


class WarpPerHead(Family):
    name = "warp_per_head"
    layout_free = True
    doc = "one warp per (token, dinp head); lanes across HD, a loop over the replicas"
    params = (
        Param("warps", (1, 2, 4, 8, 16, 32), "warps per block (block = 32 * warps)"),
        Param("vec_bytes", VEC_BYTES, "bytes per load and store"),
        Param("load", LOAD_HINTS, "global load: plain, __ldg or __ldcs"),
        Param("store", STORE_HINTS, "global store: plain or __stcs"),
    )

    def reject(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> str | None:
        return vector_reject(shape, dtype, p["vec_bytes"])

    def template_args(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> list[str]:
        warps = ceil_div(shape.tokens * shape.heads_in, p["warps"]) * p["warps"]
        largest = max(warps * 32, shape.dout_numel)
        return [dtype.ctype, str(p["vec_bytes"]), *hint_codes(p), index_type(largest)]

    def launch(self, shape: Shape, dtype: DType, p: Mapping[str, Any], sm_count: int) -> Launch:
        return Launch(ceil_div(shape.tokens * shape.heads_in, p["warps"]), 32 * p["warps"])

    def grid_terms(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> tuple[GridTerm, ...]:
        return (GridTerm(1, shape.heads_in, p["warps"]),)


FAMILY = WarpPerHead()
