"""RoPE fused into repkv forward: llm.c's `repkv_forward` then `rope_forward` (in place on the
replicated tensor) as one kernel. inp, the packed GQA qkv (B, T, NH + 2*NH_KV, HD), and freqs_cis
(T, HD) -> out (B, T, 3, NH, HD): q rotated, each K head rotated and copied to its nrep replicas,
each V head copied. llm.c's convention is written down in `rope.py`.

Numerics: the copy is exact, so llm.c's unfused chain and the fused kernel both compute each
rotated element once in float from T-rounded inputs and T-rounded cos/sin and round it once to T;
they agree bit for bit up to the compiler's fma contraction. Against the float64 rotation of the
same stored values: rtol = 2 roundings of T, atol = 4 fp32 ulps of max|input| (the float products
and sum, |x0*cos| + |x1*sin| <= sqrt(2) * max|x|, which dominates where the sum cancels).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from variants.dtypes import DType
from variants.family import Config
from variants.op import Op, Operand
from variants.rope_repkv_forward import flat, flat_runtime, naive, replicate, vec
from variants.rope_repkv_forward.rope import cos_sin, freqs_cis, rope_shape_rule, rotate
from variants.shape import Shape

FP32_U = 2.0**-24


def reference(inputs: Sequence[Any], shape: Shape, positions: Any, xp: Any) -> Any:
    """out in float64 (tokens, 3*NH*HD): repkv_forward, then rope_forward on q and every K replica."""
    inp, freqs = inputs
    x = xp.asarray(inp, dtype=xp.float64).reshape(-1, shape.heads_in, shape.HD)
    q = x[:, : shape.NH]
    k = xp.repeat(x[:, shape.NH : shape.NH + shape.NH_KV], shape.nrep, axis=1)
    v = xp.repeat(x[:, shape.NH + shape.NH_KV :], shape.nrep, axis=1)
    cos, sin = cos_sin(freqs, shape, positions, xp)
    out = xp.concatenate([rotate(q, cos, sin, xp), rotate(k, cos, sin, xp), v], axis=1)
    return out.reshape(x.shape[0], 3 * shape.NH * shape.HD)


def tolerance(dtype: DType, shape: Shape, max_abs_input: float) -> tuple[float, float]:
    return 4.0 * FP32_U * max(max_abs_input, 1.0), 2.0 * dtype.unit_roundoff


OP = Op(
    name="rope_repkv_forward",
    doc=(
        "replicate the K/V heads nrep times and apply RoPE to q and k: inp (B, T, NH + 2*NH_KV, HD), "
        "freqs_cis (T, HD) -> out (B, T, 3, NH, HD)"
    ),
    output=Operand("out", "(B, T, 3, NH, HD)", token_elements=lambda s: 3 * s.NH * s.HD),
    inputs=(
        Operand("inp", "(B, T, NH + 2*NH_KV, HD)", token_elements=lambda s: s.heads_in * s.HD),
        Operand("freqs_cis", "(T, HD)", fixed_elements=lambda s: s.T * s.HD),
    ),
    families={module.FAMILY.name: module.FAMILY for module in (naive, vec, replicate, flat, flat_runtime)},
    baseline=Config.of("naive", **naive.BASELINE_PARAMS),
    baseline_name="naive",
    reference=reference,
    tolerance=tolerance,
    fixed_inputs={"freqs_cis": freqs_cis},
    shape_rule=rope_shape_rule,
)
