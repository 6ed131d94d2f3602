"""rope_repkv's CPU parts: the PyTorch path against the variants' float64 references (llm.c's
RoPE convention), gradcheck, registration, fake implementations, torch.compile, argument
checks, and precompute_freqs_cis against the tuner's table. The CUDA kernels are tested in
tests/gpu/test_gpu_torch_op_*.py."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import repkv_tune  # noqa: E402
from repkv_tune.rope import (  # noqa: E402
    precompute_freqs_cis,
    reference_repkv_rope_backward,
    reference_rope_repkv,
    repkv_rope_backward,
    rope_repkv,
)
from variants import DTYPES, Shape, get_op  # noqa: E402
from variants.rope_repkv_forward.rope import freqs_cis as tuner_freqs_cis  # noqa: E402

# (B, T, NH, NH_KV, HD): MQA, MHA, nrep 3, HD/2 odd (6, 10), one token
SHAPES = [(2, 5, 6, 1, 8), (1, 4, 4, 4, 6), (2, 3, 6, 2, 10), (3, 7, 9, 3, 4), (1, 1, 2, 1, 2)]


def variants_reference(op_name: str, inputs: list[torch.Tensor], shape: tuple) -> np.ndarray:
    """The op's float64 reference (variants.<op>.OP.reference) over the whole batch."""
    B, T = shape[:2]
    arrays = [x.detach().double().numpy().ravel() for x in inputs]
    positions = np.tile(np.arange(T), B)
    return get_op(op_name).reference(arrays, Shape(*shape), positions, np)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_forward_and_backward_equal_the_float64_references(shape) -> None:
    B, T, NH, NH_KV, HD = shape
    qkv = torch.randn(B, T, NH + 2 * NH_KV, HD, dtype=torch.float64, requires_grad=True)
    freqs = precompute_freqs_cis(HD, T, dtype=torch.float64)
    out = rope_repkv(qkv, freqs, NH, NH_KV)
    assert out.shape == (B, T, 3, NH, HD) and out.dtype == torch.float64
    expected = variants_reference("rope_repkv_forward", [qkv, freqs], shape).reshape(out.shape)
    torch.testing.assert_close(out.detach(), torch.from_numpy(expected), rtol=1e-13, atol=1e-13)
    grad = torch.randn_like(out)
    (dinp,) = torch.autograd.grad(out, qkv, grad)
    expected = variants_reference("repkv_rope_backward", [grad, freqs], shape).reshape(dinp.shape)
    torch.testing.assert_close(dinp, torch.from_numpy(expected), rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(repkv_rope_backward(grad, freqs, NH_KV), dinp, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_lower_precisions_meet_the_ops_tolerance(dtype) -> None:
    """On the CPU they compute in float32 and round once, as the kernels: within op.tolerance."""
    shape = (2, 6, 6, 2, 16)
    B, T, NH, NH_KV, HD = shape
    name = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[dtype]
    qkv = torch.randn(B, T, NH + 2 * NH_KV, HD).to(dtype)
    freqs = precompute_freqs_cis(HD, T, dtype=dtype)
    dout = torch.randn(B, T, 3, NH, HD).to(dtype)
    for op_name, got, inputs in (
        ("rope_repkv_forward", rope_repkv(qkv, freqs, NH, NH_KV), [qkv, freqs]),
        ("repkv_rope_backward", repkv_rope_backward(dout, freqs, NH_KV), [dout, freqs]),
    ):
        assert got.dtype == dtype
        expected = variants_reference(op_name, inputs, shape).reshape(got.shape)
        atol, rtol = get_op(op_name).tolerance(DTYPES[name], Shape(*shape), float(inputs[0].abs().max()))
        torch.testing.assert_close(got.double(), torch.from_numpy(expected), atol=atol, rtol=rtol)


def test_v_is_replicated_and_not_rotated_and_position_zero_is_a_copy() -> None:
    B, T, NH, NH_KV, HD = 2, 3, 4, 2, 8
    qkv = torch.randn(B, T, NH + 2 * NH_KV, HD)
    out = rope_repkv(qkv, precompute_freqs_cis(HD, T), NH, NH_KV)
    torch.testing.assert_close(out[:, :, 2], repkv_tune.repkv(qkv, NH, NH_KV)[:, :, 2], rtol=0, atol=0)
    torch.testing.assert_close(out[:, 0], repkv_tune.repkv(qkv, NH, NH_KV)[:, 0], rtol=0, atol=0)


def test_gradcheck_in_float64() -> None:
    qkv = torch.randn(2, 3, 12, 6, dtype=torch.float64, requires_grad=True)
    freqs = precompute_freqs_cis(6, 3, dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda x: rope_repkv(x, freqs, 6, 3), (qkv,))
    mqa = torch.randn(1, 4, 6, 4, dtype=torch.float64, requires_grad=True)
    freqs = precompute_freqs_cis(4, 4, theta=10000.0, dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda x: rope_repkv(x, freqs, 4, 1), (mqa,))


def test_a_longer_tables_prefix_serves_and_freqs_cis_gets_no_gradient() -> None:
    qkv = torch.randn(1, 3, 6, 4, dtype=torch.float64, requires_grad=True)
    table = precompute_freqs_cis(4, 16, dtype=torch.float64).requires_grad_(True)
    out = rope_repkv(qkv, table[:3], 4, 1)
    torch.testing.assert_close(out, reference_rope_repkv(qkv, table[:3].detach(), 4, 1))
    out.sum().backward()
    assert qkv.grad is not None and table.grad is None


def test_precompute_freqs_cis_is_llmcs_table() -> None:
    for HD, T in ((64, 10), (6, 5), (128, 33)):
        mine = precompute_freqs_cis(HD, T)
        assert mine.shape == (T, HD) and mine.dtype == torch.float32
        assert torch.equal(mine, torch.from_numpy(tuner_freqs_cis(Shape(1, T, 1, 1, HD))))
    assert torch.equal(
        precompute_freqs_cis(8, 4, dtype=torch.bfloat16), precompute_freqs_cis(8, 4).bfloat16()
    )
    # columns (2i, 2i+1) are (cos, sin) of t / theta^(2i/HD)
    table = precompute_freqs_cis(4, 3, theta=100.0, dtype=torch.float64)
    t = torch.arange(3.0)
    torch.testing.assert_close(table[:, 0], torch.cos(t).double())
    torch.testing.assert_close(table[:, 1], torch.sin(t).double())
    torch.testing.assert_close(table[:, 2], torch.cos(t / 100.0 ** (2 / 4)).double())
    torch.testing.assert_close(table[:, 3], torch.sin(t / 100.0 ** (2 / 4)).double())


def test_precompute_freqs_cis_takes_numpy_and_torch_integers() -> None:
    # HD = np.int64(64) (a model config read with NumPy) was refused as not an int
    expected = precompute_freqs_cis(8, 5)
    assert torch.equal(precompute_freqs_cis(np.int64(8), np.int32(5)), expected)
    assert torch.equal(precompute_freqs_cis(torch.tensor(8), 5, theta=np.float32(500000.0)), expected)


def test_the_operators_are_registered_and_exported() -> None:
    assert hasattr(torch.ops.repkv_tune, "rope_repkv") and hasattr(
        torch.ops.repkv_tune, "repkv_rope_backward"
    )
    assert {"rope_repkv", "precompute_freqs_cis"} <= set(repkv_tune.__all__)
    assert repkv_tune.rope_repkv is rope_repkv and repkv_tune.precompute_freqs_cis is precompute_freqs_cis


def test_opcheck_schema_fake_and_autograd_registration() -> None:
    qkv = torch.randn(2, 3, 12, 4, requires_grad=True)
    freqs = precompute_freqs_cis(4, 3)
    torch.library.opcheck(torch.ops.repkv_tune.rope_repkv.default, (qkv, freqs, 8, 2))
    dout = torch.randn(2, 3, 3, 8, 4)
    torch.library.opcheck(torch.ops.repkv_tune.repkv_rope_backward.default, (dout, freqs, 2))


def test_compile_fullgraph_traces_through_the_ops() -> None:
    freqs = precompute_freqs_cis(6, 5)

    def step(qkv: torch.Tensor) -> torch.Tensor:
        q, k, v = rope_repkv(qkv, freqs, 6, 2).unbind(2)
        return (q * k + v).sum()

    qkv = torch.randn(2, 5, 10, 6, requires_grad=True)
    twin = qkv.detach().clone().requires_grad_(True)
    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    loss = compiled(qkv)
    loss.backward()
    expected = step(twin)
    expected.backward()
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(qkv.grad, twin.grad)


def test_the_public_wrappers_compile_with_fullgraph() -> None:
    freqs = precompute_freqs_cis(4, 3)
    dout = torch.randn(2, 3, 3, 8, 4)
    compiled = torch.compile(lambda x, f: repkv_rope_backward(x, f, 2) * 2, fullgraph=True, backend="eager")
    torch.testing.assert_close(compiled(dout, freqs), 2 * reference_repkv_rope_backward(dout, freqs, 2))


def test_fake_and_meta_tensors_get_shapes_without_running() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    qkv = torch.empty(4, 16, 48, 128, device="meta", dtype=torch.bfloat16)
    freqs = torch.empty(16, 128, device="meta", dtype=torch.bfloat16)
    out = rope_repkv(qkv, freqs, 32, 8)
    assert out.shape == (4, 16, 3, 32, 128) and out.device.type == "meta"
    dout = torch.empty(4, 16, 3, 32, 128, device="meta", dtype=torch.bfloat16)
    assert repkv_rope_backward(dout, freqs, 8).shape == (4, 16, 48, 128)
    with FakeTensorMode():
        qkv = torch.empty(2, 8, 12, 64, dtype=torch.float16)
        out = rope_repkv(qkv, torch.empty(8, 64, dtype=torch.float16), 8, 2)
        assert out.shape == (2, 8, 3, 8, 64) and out.dtype == torch.float16


def _qkv(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, dtype=dtype)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: rope_repkv(_qkv(3, 12, 4), precompute_freqs_cis(4, 3), 8, 2), r"qkv must be \(B, T"),
        (lambda: rope_repkv(_qkv(2, 3, 14, 4), precompute_freqs_cis(4, 3), 8, 3), "positive multiple"),
        (lambda: rope_repkv(_qkv(2, 3, 12, 5), torch.zeros(3, 5), 8, 2), "HD=5 is odd"),
        (lambda: rope_repkv(_qkv(2, 3, 12, 4), precompute_freqs_cis(4, 4), 8, 2), r"\(T, HD\) = \(3, 4\)"),
        (lambda: rope_repkv(_qkv(2, 3, 12, 4), precompute_freqs_cis(4, 3).ravel(), 8, 2), r"\(T, HD\)"),
        (
            lambda: rope_repkv(_qkv(2, 3, 12, 4), precompute_freqs_cis(4, 3, dtype=torch.float64), 8, 2),
            "freqs_cis must have qkv's dtype torch.float32",
        ),
        (lambda: repkv_rope_backward(_qkv(2, 3, 2, 8, 4), precompute_freqs_cis(4, 3), 2), r"\(B, T, 3, NH"),
        (lambda: repkv_rope_backward(_qkv(2, 3, 3, 8, 4), precompute_freqs_cis(4, 3), 3), "not divisible"),
        (lambda: repkv_rope_backward(_qkv(2, 3, 3, 8, 3), torch.zeros(3, 3), 2), "HD=3 is odd"),
        (lambda: repkv_rope_backward(_qkv(2, 3, 3, 8, 4), precompute_freqs_cis(4, 2), 2), r"\(T, HD\)"),
        (lambda: precompute_freqs_cis(5, 3), "positive even"),
        (lambda: precompute_freqs_cis(4, 0), "T must be a positive int"),
        (lambda: precompute_freqs_cis(4, 3, theta=0.0), "theta must be positive"),
        # a theta that is not a number ended in a TypeError from its comparison with 0
        (lambda: precompute_freqs_cis(4, 3, theta="1e4"), "theta must be positive; got '1e4'"),
        (lambda: precompute_freqs_cis(np.float64(4), 3), "positive even int"),
    ],
)
def test_bad_arguments_get_a_clear_error(call, message) -> None:
    with pytest.raises(ValueError, match=message):
        call()


def test_a_head_count_that_is_not_an_integer_is_a_type_error() -> None:
    freqs = precompute_freqs_cis(4, 3)
    with pytest.raises(TypeError, match=r"NH_KV must be an integer, got 2\.0"):
        repkv_rope_backward(torch.randn(2, 3, 3, 8, 4), freqs, 2.0)
    with pytest.raises(TypeError, match="NH must be an integer, got True"):
        rope_repkv(torch.randn(2, 3, 12, 4), freqs, True, 2)


def test_bad_arguments_are_refused_under_fake_tensors_too() -> None:
    qkv = torch.empty(2, 3, 12, 4, device="meta")
    with pytest.raises(ValueError, match="freqs_cis must have"):
        rope_repkv(qkv, torch.empty(3, 4, device="meta", dtype=torch.float16), 8, 2)
    with pytest.raises(ValueError, match="HD=5 is odd"):
        rope_repkv(torch.empty(2, 3, 12, 5, device="meta"), torch.empty(3, 5, device="meta"), 8, 2)
