"""split_runtime: repkv_backward's split_runtime with the rotation: query-rotate and K/V
sum-and-rotate blocks apart, the head layout at run time, one instantiation for every layout
(what the exported header launches for a layout nobody tuned, MQA's many replicas included)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from variants.dtypes import DType
from variants.rope_repkv_forward.rope import RopeFamily
from variants.shape import INT32_MAX, Shape
from variants.split_runtime import SplitRuntime as RepkvSplitRuntime


class SplitRuntime(RopeFamily, RepkvSplitRuntime):
    doc = "Q-rotate and K/V-sum-rotate blocks apart, the head layout at run time: one kernel for any layout"
    kernel_prefix = "repkv_rope_backward"
    template_dir = Path(__file__).resolve().parent

    def reject(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> str | None:
        """split_runtime's rules, with whole RoPE pairs a word (RopeFamily.vector_rule)."""
        if shape.tokens > INT32_MAX:  # a token's position t = token % T is taken in int
            return f"{shape.tokens} tokens are past split_runtime's 32-bit token index"
        return super().reject(shape, dtype, p)


FAMILY = SplitRuntime()
