"""rotate_runtime: MHA alone (nrep 1), where nothing is summed and dinp is dout rotated back word
for word, with the head layout read at run time: `rope_repkv_forward`'s flat_runtime with the
transposed rotation (one instantiation serves every MHA layout: the exported header's kernel for
an MHA layout nobody tuned)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from variants.dtypes import DType
from variants.rope_repkv_forward.flat_runtime import FlatRuntime
from variants.shape import Shape


class RotateRuntime(FlatRuntime):
    name = "rotate_runtime"
    doc = "nrep 1 only: WORDS words of dout a thread, the head layout at run time, q and k rotated back"
    kernel_prefix = "repkv_rope_backward"
    template_dir = Path(__file__).resolve().parent

    def reject(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> str | None:
        if shape.nrep != 1:  # the header serves it only in the nrep-1 class (layout_rule.NREP_CLASSES)
            return f"nrep={shape.nrep}: rotate_runtime sums no replicas (MHA, nrep 1, only)"
        return super().reject(shape, dtype, p)


FAMILY = RotateRuntime()
