"""vec: one thread per 4/8/16-byte word of dinp (16 bytes: float4, or 8 halves)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from variants.dtypes import DType
from variants.family import (
    BLOCK_SIZES,
    LOAD_HINTS,
    STORE_HINTS,
    Param,
)
from variants.shape import Shape
from variants.word_family import WordFamily

VEC_BYTES = (4, 8, 16)


class VecFamily(WordFamily):
    name = "vec"
    doc = "one thread per vector word of dinp: a vectorized gather"
    params = (
        Param("block", BLOCK_SIZES, "threads per block"),
        Param("vec_bytes", VEC_BYTES, "bytes per load and store"),
        Param("load", LOAD_HINTS, "global load: plain, __ldg or __ldcs"),
        Param("store", STORE_HINTS, "global store: plain or __stcs"),
    )

    def token_words(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> int:
        return shape.heads_in * shape.HD * dtype.itemsize // p["vec_bytes"]

    def largest_numel(self, shape: Shape) -> int:
        return shape.dout_numel


FAMILY = VecFamily()
