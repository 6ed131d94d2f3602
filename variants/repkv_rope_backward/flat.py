"""flat: repkv_backward's flat with the rotation: 1 or 2 words of dinp a thread, the head
layout compiled in, the replicas summed in float, q and the summed k rotated back once."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from variants.dtypes import DType
from variants.family import Param
from variants.layout_family import LAYOUT_PARAMS, LayoutFamily
from variants.rope_repkv_forward.rope import RopeFamily
from variants.shape import Shape

GROUPS = (2, 4, 8)
MAX_IN_FLIGHT = 8  # words x group: 16 spill on sm_90


class Flat(RopeFamily, LayoutFamily):
    doc = "WORDS words of dinp a thread, the head layout compiled in: sum in float, rotate q/k once"
    kernel_prefix = "repkv_rope_backward"
    template_dir = Path(__file__).resolve().parent
    # 4 words a thread spill on sm_90 (MHA, __ldg); `group` sets the registers a thread holds in
    # flight, which decide its occupancy (bf16 at nrep 8, 16-byte words: 79 registers with 8
    # replicas a group, 48 with 4, on sm_90)
    params = (
        *(Param("words", (1, 2), p.doc) if p.name == "words" else p for p in LAYOUT_PARAMS),
        Param("group", GROUPS, "replicas of a word loaded together before they are added"),
    )

    def reject(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> str | None:
        reason = super().reject(shape, dtype, p)
        if reason:
            return reason
        if p["words"] * p["group"] > MAX_IN_FLIGHT:
            return f"{p['words']} words of {p['group']} replicas: over {MAX_IN_FLIGHT} words in flight"
        if p["group"] > GROUPS[0] and p["group"] // 2 >= shape.nrep:
            return f"group {p['group']} sums nrep={shape.nrep} replicas as group {p['group'] // 2} does"
        return None

    def template_args(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> list[str]:
        args = super().template_args(shape, dtype, p)
        # GROUP follows WORDS: the replicas actually loaded together, at most nrep
        return [*args[:7], str(min(p["group"], shape.nrep)), *args[7:]]


FAMILY = Flat()
