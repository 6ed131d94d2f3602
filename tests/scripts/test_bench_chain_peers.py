"""scripts/bench_chain.py's peers on the CPU: the PyTorch chains against float64 and llm.c's RoPE source."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from bench_chain_parts.llmc import rope_expression, rope_grid, rope_reject, rope_source  # noqa: E402
from bench_chain_parts.plan import (  # noqa: E402
    SEED,
    SWEEP_BLOCKS,
)

from variants import DTYPES, OPS, Shape, get_dtype  # noqa: E402
from variants.reference import decode, encode, op_inputs, validate_output  # noqa: E402
from variants.repkv_rope_backward import llmc_chain_tolerance  # noqa: E402
from variants.rope_repkv_forward.rope import freqs_cis  # noqa: E402

# --- the PyTorch chains (the torch.compile peer) against the float64 references ---
SMALL_SHAPES = [
    Shape(B=2, T=5, NH=6, NH_KV=2, HD=6),  # nrep 3, odd T
    Shape(B=1, T=3, NH=4, NH_KV=4, HD=4),  # multi-head
    Shape(B=3, T=7, NH=5, NH_KV=1, HD=2),  # multi-query, odd NH
]


def torch_inputs(op, shape: Shape, torch_dtype):
    import torch

    x = np.random.default_rng(7).standard_normal(op.inputs[0].numel(shape))
    freqs = freqs_cis(shape, np).astype(np.float64).ravel()
    return [x, freqs], [torch.from_numpy(x).to(torch_dtype), torch.from_numpy(freqs).to(torch_dtype)]


@pytest.mark.parametrize("shape", SMALL_SHAPES, ids=str)
@pytest.mark.parametrize("fused", ["rope_repkv_forward", "repkv_rope_backward"])
def test_the_torch_chain_is_the_float64_reference(fused: str, shape: Shape) -> None:
    import torch
    from bench_chain_parts.torch_chain import CHAINS

    op = OPS[fused]
    arrays, tensors = torch_inputs(op, shape, torch.float64)
    dims = (shape.B, shape.T, shape.NH, shape.NH_KV, shape.HD)
    got = CHAINS[fused](*tensors, *dims)
    assert got.dtype == torch.float64 and got.numel() == op.output.numel(shape)
    positions = np.arange(shape.tokens) % shape.T
    expected = op.reference(arrays, shape, positions, np).ravel()
    np.testing.assert_allclose(got.numpy().ravel(), expected, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16"])
@pytest.mark.parametrize("fused", ["rope_repkv_forward", "repkv_rope_backward"])
def test_the_compiled_chain_traces_whole_and_passes_the_gpu_check(fused: str, dtype: str) -> None:
    """As the benchmark compiles it (dynamic=False, fullgraph=True; a CPU backend here), from
    the benchmark's storage arrays, checked as its GPU half checks it."""
    import torch
    from bench_chain_parts.torch_chain import CHAINS, TORCH_DTYPES

    op, d, shape = OPS[fused], get_dtype(dtype), Shape(B=2, T=5, NH=6, NH_KV=2, HD=8)
    stored = op_inputs(op, shape, d, np, seed=3)
    tensors = [torch.from_numpy(decode(s, d).astype(np.float32)).to(TORCH_DTYPES[dtype]) for s in stored]
    torch._dynamo.reset()
    compiled = torch.compile(CHAINS[fused], dynamic=False, fullgraph=True, backend="aot_eager")
    got = compiled(*tensors, shape.B, shape.T, shape.NH, shape.NH_KV, shape.HD)
    assert got.dtype == TORCH_DTYPES[dtype] and got.numel() == op.output.numel(shape)
    storage = encode(got.float().numpy().ravel(), d)
    check_op = op
    if op.name == "repkv_rope_backward":  # llm.c's order rounds each rotated replica first
        import dataclasses

        check_op = dataclasses.replace(op, tolerance=llmc_chain_tolerance)
    validation = validate_output(storage, stored, shape, d, np, op=check_op)
    assert validation.ok, validation.summary()


# --- llm.c's RoPE kernels ---
def test_rope_launch_covers_every_pair_and_refuses_what_llmc_cannot_index() -> None:
    for shape in (SEED, Shape(B=1, T=3, NH=5, NH_KV=1, HD=6)):
        for block in SWEEP_BLOCKS:
            assert rope_grid(shape, block) * block >= shape.tokens * 3 * shape.NH * shape.HD // 2
            assert rope_grid(shape, block) * block < shape.tokens * 3 * shape.NH * shape.HD // 2 + block
            assert rope_reject(shape, block) is None
    assert "odd" in rope_reject(Shape(B=1, T=3, NH=4, NH_KV=2, HD=7), 128)
    assert "2^31" in rope_reject(Shape(B=64, T=8192, NH=32, NH_KV=8, HD=128), 128)


def test_llmc_rope_source_compiles_with_nvrtc() -> None:
    nvrtc = pytest.importorskip("variants.nvrtc")
    try:
        nvrtc.nvrtc_version()
    except nvrtc.NvrtcUnavailable as exc:
        pytest.skip(str(exc))
    expressions = tuple(rope_expression(d, backward) for d in DTYPES.values() for backward in (False, True))
    program = nvrtc.Program("llmc_rope", rope_source(), ("-std=c++17",), expressions)
    reports = nvrtc.compile_program(program, "sm_90")
    assert [r.expression for r in reports] == list(expressions)
    for report in reports:
        assert report.ok, report.error
        assert not report.spills and report.registers > 0
    assert "ae6917f6f260d714de5715872385f7e1e976c4a3" in rope_source()
    assert "llmc/rope.cuh" in rope_source()
