"""warp_sum: repkv_backward's warp_sum with the rotation: query-rotate blocks, and each K/V group
summed by one warp reading its replicas as one contiguous run, then rotated once (k); HD and
nrep compiled in, for large nrep (MQA) where a word holds a small part of a head."""

from __future__ import annotations

from pathlib import Path

from variants.dtypes import DType
from variants.rope_repkv_forward.rope import RopeFamily, rope_vector_reject
from variants.shape import Shape
from variants.warp_sum import WarpSum as RepkvWarpSum
from variants.warp_sum import warp_reject


class WarpSum(RopeFamily, RepkvWarpSum):
    doc = "Q-rotate blocks; a warp per K/V group reads its replicas as one run, sums, rotates"
    kernel_prefix = "repkv_rope_backward"
    template_dir = Path(__file__).resolve().parent

    def vector_rule(self, shape: Shape, dtype: DType, vec_bytes: int) -> str | None:
        return rope_vector_reject(shape, dtype, vec_bytes) or warp_reject(shape, dtype, vec_bytes)


FAMILY = WarpSum()
