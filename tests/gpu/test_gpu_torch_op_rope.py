"""The PyTorch forward ops on a GPU: repkv_forward bit for bit, rope_repkv in tolerance, graphs, compile."""

from __future__ import annotations

import pytest
from torch_op_helpers import DTYPES, SHAPES

torch = pytest.importorskip("torch")

from repkv_tune import launcher as op_launcher  # noqa: E402
from repkv_tune.ops import reference_forward, repkv, served  # noqa: E402
from repkv_tune.rope import (  # noqa: E402
    precompute_freqs_cis,
    reference_repkv_rope_backward,
    reference_rope_repkv,
    repkv_rope_backward,
    rope_repkv,
)
from variants import DTYPES as VARIANT_DTYPES  # noqa: E402
from variants import Shape, get_op  # noqa: E402

pytestmark = pytest.mark.gpu


# --- the tuned forward, and RoPE fused in ---------------------------------------------------
NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


# (B, T, NH, NH_KV, HD): the seed layout, MQA, HD 72, nrep 3 with HD 6 (a narrow word)
ROPE_SHAPES = [(8, 1024, 32, 8, 128), (3, 100, 8, 1, 64), (1, 77, 12, 4, 72), (2, 33, 9, 3, 6)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [*SHAPES, (2, 33, 9, 3, 6), (1, 5, 4, 2, 3)], ids=str)
def test_the_forward_is_the_tuned_kernel_and_equals_index_select_bit_for_bit(shape, dtype) -> None:
    B, T, NH, NH_KV, HD = shape
    qkv = torch.randn(B, T, NH + 2 * NH_KV, HD, device="cuda", dtype=dtype)
    out = repkv(qkv, NH, NH_KV)
    assert torch.equal(out, reference_forward(qkv, NH, NH_KV))
    launched = ("repkv_forward", shape, NAMES[dtype], 0) in op_launcher.LAUNCHERS._by_key
    assert launched == (NH != NH_KV)  # NH == NH_KV: a plain device copy
    flat = torch.randn(qkv.numel() + 1, device="cuda", dtype=dtype)
    odd = flat[1:].view(qkv.shape)  # not on a 16-byte boundary: copied first
    assert torch.equal(repkv(odd, NH, NH_KV), reference_forward(odd, NH, NH_KV))
    strided = torch.randn(B, T, NH + 2 * NH_KV, HD + 2, device="cuda", dtype=dtype)[..., :HD]
    assert torch.equal(repkv(strided, NH, NH_KV), reference_forward(strided, NH, NH_KV))


def assert_within_op_tolerance(
    op_name: str, got: torch.Tensor, expected: torch.Tensor, x: torch.Tensor
) -> None:
    shape = Shape(got.shape[0], got.shape[1], *_heads(op_name, got, x))
    atol, rtol = get_op(op_name).tolerance(VARIANT_DTYPES[NAMES[got.dtype]], shape, float(x.abs().max()))
    torch.testing.assert_close(got.double(), expected, atol=atol, rtol=rtol)


def _heads(op_name: str, got: torch.Tensor, x: torch.Tensor) -> tuple[int, int, int]:
    """(NH, NH_KV, HD) from the forward's out (B, T, 3, NH, HD) and qkv, or the backward's
    dinp (B, T, NH + 2*NH_KV, HD) and dout (B, T, 3, NH, HD)."""
    if op_name == "rope_repkv_forward":
        NH, HD = got.shape[3], got.shape[4]
        return NH, (x.shape[2] - NH) // 2, HD
    NH, HD = x.shape[3], x.shape[4]
    return NH, (got.shape[2] - NH) // 2, HD


def rope_inputs(shape, dtype):
    B, T, NH, NH_KV, HD = shape
    qkv = torch.randn(B, T, NH + 2 * NH_KV, HD, device="cuda", dtype=dtype)
    return qkv, precompute_freqs_cis(HD, T, dtype=dtype, device="cuda")


def assert_rope_repkv_both_ways(shape, dtype) -> None:
    """rope_repkv's forward, and its autograd (the fused backward), within each op's tolerance."""
    B, T, NH, NH_KV, HD = shape
    qkv, freqs = rope_inputs(shape, dtype)
    qkv.requires_grad_(True)
    out = rope_repkv(qkv, freqs, NH, NH_KV)
    assert out.shape == (B, T, 3, NH, HD) and out.dtype == dtype
    expected = reference_rope_repkv(qkv.detach().double(), freqs.double(), NH, NH_KV)
    assert_within_op_tolerance("rope_repkv_forward", out.detach(), expected, qkv.detach())
    grad = torch.randn_like(out)
    (dinp,) = torch.autograd.grad(out, qkv, grad)
    expected = reference_repkv_rope_backward(grad.double(), freqs.double(), NH_KV)
    assert_within_op_tolerance("repkv_rope_backward", dinp, expected, grad)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", ROPE_SHAPES, ids=str)
def test_rope_repkv_forward_and_backward_meet_the_ops_tolerance(shape, dtype) -> None:
    assert_rope_repkv_both_ways(shape, dtype)
    for op_name in ("rope_repkv_forward", "repkv_rope_backward"):
        key, how, race = served(shape, dtype, op=op_name)
        assert how in ("exact", "nearest", "generic", "raced", "refined"), (op_name, key)
        assert (key in dict(race)) == (how in ("raced", "refined")), (op_name, key, how, race)


def test_a_new_head_layout_races_each_ops_shortlist_and_its_winners_neighbours() -> None:
    """40 query heads on one K/V head, a layout no op's store tuned: every op races its own
    shortlist on its own inputs, then the winner's one-parameter neighbours; each served
    kernel is right."""
    shape, dtype = (1, 1024, 40, 1, 128), torch.bfloat16
    for op_name in ("repkv_forward", "rope_repkv_forward", "repkv_rope_backward"):
        key, how, race = served(shape, dtype, op=op_name)
        keys = [k for k, _ in race]
        assert how in ("raced", "refined") and len(keys) == len(set(keys)) >= 3, (op_name, keys)
        assert key in keys
    NH, NH_KV = shape[2], shape[3]
    qkv, _ = rope_inputs(shape, dtype)
    assert torch.equal(repkv(qkv, NH, NH_KV), reference_forward(qkv, NH, NH_KV))
    assert_rope_repkv_both_ways(shape, dtype)


def test_rope_repkv_under_cuda_graph_capture_and_replay() -> None:
    shape = (2, 512, 32, 8, 128)
    B, T, NH, NH_KV, HD = shape
    qkv, freqs = rope_inputs(shape, torch.bfloat16)
    dout = torch.randn(B, T, 3, NH, HD, device="cuda", dtype=torch.bfloat16)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # compile and pack before capture
        rope_repkv(qkv, freqs, NH, NH_KV)
        repkv_rope_backward(dout, freqs, NH_KV)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = rope_repkv(qkv, freqs, NH, NH_KV)
        dinp = repkv_rope_backward(dout, freqs, NH_KV)
    for _ in range(3):
        qkv.copy_(torch.randn_like(qkv))
        dout.copy_(torch.randn_like(dout))
        graph.replay()
        torch.cuda.synchronize()
        expected = reference_rope_repkv(qkv.double(), freqs.double(), NH, NH_KV)
        assert_within_op_tolerance("rope_repkv_forward", out, expected, qkv)
        expected = reference_repkv_rope_backward(dout.double(), freqs.double(), NH_KV)
        assert_within_op_tolerance("repkv_rope_backward", dinp, expected, dout)


def test_rope_repkv_inside_torch_compile_fullgraph() -> None:
    shape = (2, 128, 32, 8, 128)
    B, T, NH, NH_KV, HD = shape
    qkv, freqs = rope_inputs(shape, torch.bfloat16)
    qkv.requires_grad_(True)
    weights = torch.randn(B, T, 3, NH, HD, device="cuda", dtype=torch.float32)

    def step(x: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
        return (rope_repkv(x, f, NH, NH_KV).float() * weights).sum()

    twin = qkv.detach().clone().requires_grad_(True)
    torch._dynamo.reset()
    compiled = torch.compile(step, fullgraph=True, dynamic=False)
    compiled(qkv, freqs).backward()
    step(twin, freqs).backward()
    torch.testing.assert_close(qkv.grad, twin.grad)
    dout = weights.bfloat16()  # the gradient that reaches the fused backward
    expected = reference_repkv_rope_backward(dout.double(), freqs.double(), NH_KV)
    assert_within_op_tolerance("repkv_rope_backward", qkv.grad, expected, dout)
