"""split: repkv_backward's split with the rotation: query-copy blocks and K/V-sum blocks apart,
HD and nrep compiled in, ITEMS loads in flight a thread; for large nrep (MQA), where a thread of
`flat` or `vec` sums every replica of its word alone."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from variants.dtypes import DType
from variants.rope_repkv_forward.rope import RopeFamily, rope_vector_reject
from variants.shape import INT32_MAX, Shape
from variants.split import Split as RepkvSplit


class Split(RopeFamily, RepkvSplit):
    doc = "Q-rotate and K/V-sum-rotate blocks apart; HD, nrep compile-time; ITEMS loads in flight"
    kernel_prefix = "repkv_rope_backward"
    template_dir = Path(__file__).resolve().parent

    def reject(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> str | None:
        if shape.tokens > INT32_MAX:  # a token's position t = token % T is taken in int
            return f"{shape.tokens} tokens are past split's 32-bit token index"
        return rope_vector_reject(shape, dtype, p["vec_bytes"])


FAMILY = Split()
