"""vec: one thread per 4/8/16-byte word of dinp (16 bytes: float4, or 8 halves)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from variants.dtypes import DType
from variants.shape import Shape
from variants.word_family import WORD_PARAMS, WordFamily


class VecFamily(WordFamily):
    name = "vec"
    doc = "one thread per vector word of dinp: a vectorized gather"
    params = WORD_PARAMS

    def token_words(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> int:
        return shape.heads_in * shape.HD * dtype.itemsize // p["vec_bytes"]

    def largest_numel(self, shape: Shape) -> int:
        return shape.dout_numel


FAMILY = VecFamily()
