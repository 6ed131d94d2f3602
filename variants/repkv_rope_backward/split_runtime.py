"""split_runtime: repkv_backward's split_runtime with the rotation: query-rotate and K/V
sum-and-rotate blocks apart, the head layout at run time, one instantiation for every layout
(what the exported header launches for a layout nobody tuned, MQA's many replicas included)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from variants.dtypes import DType
from variants.family import MAX_GRID
from variants.rope_repkv_forward.rope import RopeFamily, rope_vector_reject
from variants.shape import INT32_MAX, Shape
from variants.split_runtime import SplitRuntime as RepkvSplitRuntime


class SplitRuntime(RopeFamily, RepkvSplitRuntime):
    doc = "Q-rotate and K/V-sum-rotate blocks apart, the head layout at run time: one kernel for any layout"
    kernel_prefix = "repkv_rope_backward"
    template_dir = Path(__file__).resolve().parent

    def reject(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> str | None:
        if shape.tokens > INT32_MAX:  # a token's position t = token % T is taken in int
            return f"{shape.tokens} tokens are past split_runtime's 32-bit token index"
        reason = rope_vector_reject(shape, dtype, p["vec_bytes"])
        if reason is None and sum(self.blocks(shape, dtype, p)) > MAX_GRID:
            reason = f"{sum(self.blocks(shape, dtype, p))} blocks of {p['block']} exceed CUDA's grid"
        return reason


FAMILY = SplitRuntime()
