"""repkv backward (llm.c `repkv_backward`): dout (B, T, 3, NH, HD) -> dinp (B, T, NH + 2*NH_KV, HD);
the query heads copied, each K/V head the sum of its nrep replicas' gradients."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from variants.bulk import FAMILY as BULK
from variants.dtypes import DType
from variants.family import Config
from variants.flat import FAMILY as FLAT
from variants.gather import FAMILY as GATHER
from variants.naive import BASELINE_PARAMS
from variants.naive import FAMILY as NAIVE
from variants.op import Op, Operand
from variants.reference import reference
from variants.shape import Shape
from variants.split import FAMILY as SPLIT
from variants.split_runtime import FAMILY as SPLIT_RUNTIME
from variants.tile import FAMILY as TILE
from variants.vec import FAMILY as VEC
from variants.warp_per_head import FAMILY as WARP_PER_HEAD
from variants.warp_sum import FAMILY as WARP_SUM
from variants.warp_sum_runtime import FAMILY as WARP_SUM_RUNTIME


def _reference(inputs: Sequence[Any], shape: Shape, positions: Any, xp: Any) -> Any:
    return reference(inputs[0], shape, xp)


def _tolerance(dtype: DType, shape: Shape, max_abs_input: float) -> tuple[float, float]:
    return dtype.tolerance(shape.nrep, max_abs_input)


OP = Op(
    name="repkv_backward",
    doc="sum the gradients of the K/V replicas: dout (B, T, 3, NH, HD) -> dinp (B, T, NH + 2*NH_KV, HD)",
    output=Operand("dinp", "(B, T, NH + 2*NH_KV, HD)", token_elements=lambda s: s.heads_in * s.HD),
    inputs=(Operand("dout", "(B, T, 3, NH, HD)", token_elements=lambda s: 3 * s.NH * s.HD),),
    families={
        f.name: f
        for f in (
            *(NAIVE, GATHER, VEC, WARP_PER_HEAD, SPLIT, TILE, BULK, FLAT),
            *(SPLIT_RUNTIME, WARP_SUM, WARP_SUM_RUNTIME),
        )
    },
    baseline=Config.of("naive", **BASELINE_PARAMS),
    reference=_reference,
    tolerance=_tolerance,
    copies_without_replicas=True,
    sums_replicas=True,
)
