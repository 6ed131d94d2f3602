"""vec: one thread per 4/8/16-byte word of out, a vectorized gather (each K/V word is read
nrep times, once per replica)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from variants.dtypes import DType
from variants.repkv_forward.layout import out_numel, out_token_elements
from variants.shape import Shape
from variants.word_family import WORD_PARAMS, WordFamily


class VecFamily(WordFamily):
    name = "vec"
    doc = "one thread per vector word of out: a vectorized gather"
    params = WORD_PARAMS
    kernel_prefix = "repkv_forward"
    template_dir = Path(__file__).resolve().parent

    def token_words(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> int:
        """Threads per token: words of out (`replicate`: of inp)."""
        return out_token_elements(shape) * dtype.itemsize // p["vec_bytes"]

    def largest_numel(self, shape: Shape) -> int:
        return out_numel(shape)  # out is the larger tensor: 3*NH >= NH + 2*NH_KV heads


FAMILY = VecFamily()
