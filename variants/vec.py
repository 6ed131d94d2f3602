"""vec: one thread per 4/8/16-byte word of dinp (16 bytes: float4, or 8 halves)."""

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
    vector_reject,
)
from variants.shape import Shape

VEC_BYTES = (4, 8, 16)


class VecFamily(Family):
    name = "vec"
    doc = "one thread per vector word of dinp: a vectorized gather"
    params = (
        Param("block", BLOCK_SIZES, "threads per block"),
        Param("vec_bytes", VEC_BYTES, "bytes per load and store"),
        Param("load", LOAD_HINTS, "global load: plain, __ldg or __ldcs"),
        Param("store", STORE_HINTS, "global store: plain or __stcs"),
    )

    def reject(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> str | None:
        return vector_reject(shape, dtype, p["vec_bytes"])

    def words(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> int:
        return shape.dinp_numel * dtype.itemsize // p["vec_bytes"]

    def template_args(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> list[str]:
        threads = ceil_div(self.words(shape, dtype, p), p["block"]) * p["block"]
        largest = max(threads, shape.dout_numel)
        return [dtype.ctype, str(p["vec_bytes"]), *hint_codes(p), index_type(largest)]

    def launch(self, shape: Shape, dtype: DType, p: Mapping[str, Any], sm_count: int) -> Launch:
        return Launch(ceil_div(self.words(shape, dtype, p), p["block"]), p["block"])

    def grid_terms(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> tuple[GridTerm, ...]:
        return (GridTerm(1, shape.heads_in * shape.HD * dtype.itemsize // p["vec_bytes"], p["block"]),)


FAMILY = VecFamily()
