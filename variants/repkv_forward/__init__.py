"""repkv forward (llm.c `repkv_forward`): inp, the packed GQA qkv (B, T, NH + 2*NH_KV, HD) ->
out (B, T, 3, NH, HD); the query heads copied, each K/V head copied to its nrep replicas. A pure
copy, so every dtype must come out bit-exact."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from variants.dtypes import DType
from variants.family import Config
from variants.op import Op, Operand
from variants.repkv_forward import flat, naive, replicate, vec
from variants.repkv_forward.layout import inp_token_elements, out_token_elements
from variants.shape import Shape


def _reference(inputs: Sequence[Any], shape: Shape, positions: Any, xp: Any) -> Any:
    """out in float64, (B, T, 3, NH, HD), from inp (float64, B*T tokens)."""
    x = xp.asarray(inputs[0], dtype=xp.float64).reshape(shape.B, shape.T, shape.heads_in, shape.HD)
    q = x[:, :, : shape.NH]
    k = xp.repeat(x[:, :, shape.NH : shape.NH + shape.NH_KV], shape.nrep, axis=2)
    v = xp.repeat(x[:, :, shape.NH + shape.NH_KV :], shape.nrep, axis=2)
    return xp.stack([q, k, v], axis=2)


def _tolerance(dtype: DType, shape: Shape, max_abs_input: float) -> tuple[float, float]:
    return 0.0, 0.0  # a copy: bit-exact (NaN never passes)


OP = Op(
    name="repkv_forward",
    doc="replicate the K/V heads nrep times: inp (B, T, NH + 2*NH_KV, HD) -> out (B, T, 3, NH, HD)",
    output=Operand("out", "(B, T, 3, NH, HD)", token_elements=out_token_elements),
    inputs=(Operand("inp", "(B, T, NH + 2*NH_KV, HD)", token_elements=inp_token_elements),),
    families={module.FAMILY.name: module.FAMILY for module in (naive, vec, replicate, flat)},
    baseline=Config.of("naive", **naive.BASELINE_PARAMS),
    reference=_reference,
    tolerance=_tolerance,
    copies_without_replicas=True,
)
