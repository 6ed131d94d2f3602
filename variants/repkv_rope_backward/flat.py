"""flat: repkv_backward's flat with the rotation: 1, 2 or 4 words of dinp a thread, the head
layout compiled in, the replicas summed in float, q and the summed k rotated back once."""

from __future__ import annotations

from pathlib import Path

from variants.dtypes import DType
from variants.family import Param
from variants.layout_family import LAYOUT_PARAMS, LayoutFamily
from variants.rope_repkv_forward.rope import RopeFamily, rope_vector_reject
from variants.shape import Shape


class Flat(RopeFamily, LayoutFamily):
    doc = "WORDS words of dinp a thread, the head layout compiled in: sum in float, rotate q/k once"
    kernel_prefix = "repkv_rope_backward"
    template_dir = Path(__file__).resolve().parent
    # 4 words a thread spill on sm_90 (MHA, __ldg) and leave fewer replicas a group in flight
    params = tuple(Param("words", (1, 2), p.doc) if p.name == "words" else p for p in LAYOUT_PARAMS)

    def vector_rule(self, shape: Shape, dtype: DType, vec_bytes: int) -> str | None:
        return rope_vector_reject(shape, dtype, vec_bytes)


FAMILY = Flat()
