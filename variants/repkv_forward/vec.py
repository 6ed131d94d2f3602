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
    STORE_HINTS,
    Param,
)
from variants.repkv_forward.layout import out_numel, out_token_elements
from variants.shape import Shape
from variants.word_family import WordFamily

VEC_BYTES = (4, 8, 16)


class VecFamily(WordFamily):
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

    def largest_numel(self, shape: Shape) -> int:
        return out_numel(shape)  # out is the larger tensor: 3*NH >= NH + 2*NH_KV heads


FAMILY = VecFamily()
