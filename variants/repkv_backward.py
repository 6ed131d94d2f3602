"""repkv backward (llm.c `repkv_backward`): dout (B, T, 3, NH, HD) -> dinp (B, T, NH + 2*NH_KV, HD);
the query heads copied, each K/V head the sum of its nrep replicas' gradients."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from variants import bulk, flat, gather, naive, split, tile, vec, warp_per_head
from variants.dtypes import DType
from variants.family import Config
from variants.op import Op, Operand
from variants.reference import reference
from variants.shape import Shape


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
        module.FAMILY.name: module.FAMILY
        for module in (naive, gather, vec, warp_per_head, split, tile, bulk, flat)
    },
    baseline=Config.of("naive", **naive.BASELINE_PARAMS),
    reference=_reference,
    tolerance=_tolerance,
)
