"""RoPE fused into repkv backward: llm.c's `rope_backward_inplace` then `repkv_backward` as one
kernel. dout (B, T, 3, NH, HD), the gradient of the replicated and rotated qkv, and freqs_cis
(T, HD) -> dinp (B, T, NH + 2*NH_KV, HD): q rotated back; each K group summed in float, then
rotated back once (every replica of a position has the same cos/sin, so the rotation commutes
with the sum); each V group summed. Rounded once to T. llm.c's convention: see
`variants.rope_repkv_forward.rope`.

Numerics against the float64 reference of the same stored values:

- fused (`tolerance`): the fp32 sum errs by at most nrep^2 * u32 * max|dout| (DType.tolerance);
  the rotation carries that error times |cos| + |sin| <= sqrt(2), and adds its own float products
  and sum, 2 * u32 * (|S0*cos| + |S1*sin|) <= 2*sqrt(2) * nrep * u32 * max|dout|. So atol =
  (2*nrep^2 + 4*nrep) * u32 * max|dout| covers both orders (sum then rotate, or `naive`'s rotate
  then sum), and rtol = 2 roundings of T as for repkv_backward.
- llm.c's unfused chain (`llmc_chain_tolerance`): rope_backward_inplace rounds each rotated
  replica to T (|rotated| <= sqrt(2) * max|dout|, error u_T * sqrt(2) * max|dout| each), then
  repkv_backward sums the nrep rounded values and rounds again. So atol = nrep * sqrt(2) * u_T *
  max|dout| + the fused atol, rtol = 2 * u_T. In bf16 (u_T = 2^-8) that atol is about
  nrep * 5.5e-3 * max|dout|, where the fused atol is about (2*nrep^2 + 4*nrep) * 6e-8 * max|dout|:
  where a group's gradients cancel, llm.c's chain can be off by several bf16 ulps of the largest
  replica, the fused kernel only by one rounding of the result.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from variants.dtypes import DType
from variants.family import Config
from variants.op import Op, Operand
from variants.reference import reference as repkv_backward_reference
from variants.repkv_rope_backward import (
    flat,
    naive,
    rotate_runtime,
    split,
    split_runtime,
    vec,
    warp_sum,
    warp_sum_runtime,
)
from variants.rope_repkv_forward.rope import cos_sin, freqs_cis, rope_shape_rule, rotate
from variants.shape import Shape

FP32_U = 2.0**-24


def reference(inputs: Sequence[Any], shape: Shape, positions: Any, xp: Any) -> Any:
    """dinp in float64 (tokens, (NH + 2*NH_KV)*HD): rope_backward on q and every K replica,
    then repkv_backward."""
    dout, freqs = inputs
    d = xp.asarray(dout, dtype=xp.float64).reshape(-1, 3 * shape.NH, shape.HD)
    cos, sin = cos_sin(freqs, shape, positions, xp)
    qk = rotate(d[:, : 2 * shape.NH], cos, sin, xp, backward=True)
    rotated = xp.concatenate([qk, d[:, 2 * shape.NH :]], axis=1)
    tokens = d.shape[0]
    dinp = repkv_backward_reference(rotated, Shape(1, tokens, shape.NH, shape.NH_KV, shape.HD), xp)
    return dinp.reshape(tokens, shape.heads_in * shape.HD)


def tolerance(dtype: DType, shape: Shape, max_abs_input: float) -> tuple[float, float]:
    largest = max(max_abs_input, 1.0)
    atol, rtol = dtype.tolerance(shape.nrep, max_abs_input)
    return 2.0 * atol + 4.0 * shape.nrep * FP32_U * largest, rtol


def llmc_chain_tolerance(dtype: DType, shape: Shape, max_abs_input: float) -> tuple[float, float]:
    """What llm.c's unfused rope_backward_inplace + repkv_backward meet (each rotated replica
    rounded to T before the sum): the fused tolerance plus nrep intermediate roundings."""
    atol, rtol = tolerance(dtype, shape, max_abs_input)
    return atol + shape.nrep * math.sqrt(2.0) * dtype.unit_roundoff * max(max_abs_input, 1.0), rtol


OP = Op(
    name="repkv_rope_backward",
    doc=(
        "RoPE backward of q and k, then sum the gradients of the K/V replicas (each K group summed "
        "before its one rotation): dout (B, T, 3, NH, HD), freqs_cis (T, HD) -> dinp (B, T, NH + 2*NH_KV, HD)"
    ),
    output=Operand("dinp", "(B, T, NH + 2*NH_KV, HD)", token_elements=lambda s: s.heads_in * s.HD),
    inputs=(
        Operand("dout", "(B, T, 3, NH, HD)", token_elements=lambda s: 3 * s.NH * s.HD),
        Operand("freqs_cis", "(T, HD)", fixed_elements=lambda s: s.T * s.HD),
    ),
    families={
        module.FAMILY.name: module.FAMILY
        for module in (naive, vec, flat, split, split_runtime, rotate_runtime, warp_sum, warp_sum_runtime)
    },
    baseline=Config.of("naive", **naive.BASELINE_PARAMS),
    baseline_name="naive",
    reference=reference,
    tolerance=tolerance,
    fixed_inputs={"freqs_cis": freqs_cis},
    shape_rule=rope_shape_rule,
    sums_replicas=True,
)
