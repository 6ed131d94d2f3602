"""flat: replicate with the head layout compiled in and 1, 2 or 4 words of inp a thread: each
q/k word rotated once, then stored to its replicas; no runtime division but the position's."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from variants.dtypes import DType
from variants.layout_family import LayoutFamily
from variants.rope_repkv_forward.rope import RopeFamily
from variants.shape import Shape


class Flat(RopeFamily, LayoutFamily):
    doc = "WORDS words of inp a thread, the head layout compiled in: one load and rotation, nrep stores"
    kernel_prefix = "rope_repkv_forward"
    template_dir = Path(__file__).resolve().parent

    def reject(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> str | None:
        reason = super().reject(shape, dtype, p)
        if reason is None and p["words"] == 4 and self.template_args(shape, dtype, p)[-1] != "int":
            return "4 words a thread with 64-bit indices spill (sm_90, sm_80)"
        return reason


FAMILY = Flat()
