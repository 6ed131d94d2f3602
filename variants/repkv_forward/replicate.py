"""replicate: one thread per 4/8/16-byte word of inp: each K/V word is loaded once and stored
to its nrep replicas, each query word loaded and stored once."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from variants.dtypes import DType
from variants.repkv_forward.layout import inp_token_elements
from variants.repkv_forward.vec import VecFamily
from variants.shape import Shape


class Replicate(VecFamily):
    """vec's parameters, rules and index type; the threads run over inp's words instead."""

    name = "replicate"
    doc = "one thread per vector word of inp: one load, nrep stores for K/V"

    def token_words(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> int:
        return inp_token_elements(shape) * dtype.itemsize // p["vec_bytes"]


FAMILY = Replicate()
