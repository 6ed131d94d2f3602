"""gather: one thread per dinp element, scalar loads (llm.c's kernel2 idea)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from variants.dtypes import DType
from variants.family import (
    BLOCK_SIZES,
    LOAD_HINTS,
    STORE_HINTS,
    Family,
    GridTerm,
    Launch,
    Param,
    ceil_div,
    hint_codes,
    index_type,
)
from variants.shape import Shape


class Gather(Family):
    name = "gather"
    layout_free = True
    doc = "one thread per dinp element, scalar loads, 64-bit indices where needed"
    params = (
        Param("block", BLOCK_SIZES, "threads per block"),
        Param("load", LOAD_HINTS, "global load: plain, __ldg or __ldcs"),
        Param("store", STORE_HINTS, "global store: plain or __stcs"),
    )

    def template_args(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> list[str]:
        threads = ceil_div(shape.dinp_numel, p["block"]) * p["block"]
        largest = max(threads, shape.dout_numel)
        return [dtype.ctype, *hint_codes(p), index_type(largest)]

    def launch(self, shape: Shape, dtype: DType, p: Mapping[str, Any], sm_count: int) -> Launch:
        return Launch(ceil_div(shape.dinp_numel, p["block"]), p["block"])

    def grid_terms(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> tuple[GridTerm, ...]:
        return (GridTerm(1, shape.heads_in * shape.HD, p["block"]),)


FAMILY = Gather()
