"""warp_sum_runtime: the fused backward's warp_sum with the head layout read at run time, one
instantiation for every layout whose head's words divide 32 (the header's MQA kernel for a
layout nobody tuned)."""

from __future__ import annotations

from variants.repkv_rope_backward.warp_sum import WarpSum
from variants.warp_sum_runtime import RuntimeLayout


class WarpSumRuntime(RuntimeLayout, WarpSum):
    doc = "warp_sum with the head layout at run time: one kernel for any layout whose head's words divide 32"


FAMILY = WarpSumRuntime()
