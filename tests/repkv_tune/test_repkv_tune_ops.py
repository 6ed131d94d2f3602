"""The PyTorch operators' CPU parts: registration, the fake implementations that
torch.compile traces, autograd, argument checks. The tuned CUDA path is tested in
tests/gpu/test_gpu_torch_op_*.py."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from repkv_tune.ops import reference_backward, repkv, repkv_backward, served  # noqa: E402


def repeat_kv(x: torch.Tensor, nrep: int) -> torch.Tensor:
    """HF's repeat_kv on (B, T, H, D): expand then reshape."""
    B, T, H, D = x.shape
    return x[:, :, :, None, :].expand(B, T, H, nrep, D).reshape(B, T, H * nrep, D)


def replicated(qkv: torch.Tensor, NH: int, NH_KV: int) -> torch.Tensor:
    q, k, v = qkv.split([NH, NH_KV, NH_KV], dim=2)
    nrep = NH // NH_KV
    return torch.stack([q, repeat_kv(k, nrep), repeat_kv(v, nrep)], dim=2)


SHAPES = [(2, 3, 8, 2, 4), (1, 5, 4, 4, 3), (2, 2, 6, 1, 8)]  # (B, T, NH, NH_KV, HD): nrep 4, 1, 6


def test_the_operators_are_registered() -> None:
    for name in ("repkv", "repkv_backward", "repkv_backward_out"):
        assert hasattr(torch.ops.repkv_tune, name)


@pytest.mark.parametrize("shape", SHAPES)
def test_forward_and_backward_match_autograd_of_repeat_kv(shape) -> None:
    B, T, NH, NH_KV, HD = shape
    qkv = torch.randn(B, T, NH + 2 * NH_KV, HD, dtype=torch.float64, requires_grad=True)
    mine = repkv(qkv, NH, NH_KV)
    theirs = replicated(qkv, NH, NH_KV)
    assert torch.equal(mine, theirs)
    grad = torch.randn_like(mine)
    (mine_grad,) = torch.autograd.grad(mine, qkv, grad)
    (their_grad,) = torch.autograd.grad(theirs, qkv, grad)
    torch.testing.assert_close(mine_grad, their_grad)
    torch.testing.assert_close(repkv_backward(grad, NH_KV), their_grad)


def test_gradcheck_in_float64() -> None:
    qkv = torch.randn(2, 3, 8, 4, dtype=torch.float64, requires_grad=True)[:, :, :8]
    assert torch.autograd.gradcheck(lambda x: repkv(x, 4, 2), (qkv,))


def test_opcheck_schema_fake_and_autograd_registration() -> None:
    qkv = torch.randn(2, 3, 12, 4, requires_grad=True)
    torch.library.opcheck(torch.ops.repkv_tune.repkv.default, (qkv, 8, 2))
    dout = torch.randn(2, 3, 3, 8, 4)
    torch.library.opcheck(torch.ops.repkv_tune.repkv_backward.default, (dout, 2))
    torch.library.opcheck(
        torch.ops.repkv_tune.repkv_backward_out.default, (dout, 2, torch.empty(2, 3, 12, 4))
    )


def test_out_is_written_and_returned() -> None:
    dout = torch.randn(2, 3, 3, 8, 4)
    out = torch.full((2, 3, 12, 4), float("nan"))
    assert repkv_backward(dout, 2, out=out) is out
    torch.testing.assert_close(out, reference_backward(dout, 2))


def test_compile_fullgraph_traces_through_the_ops() -> None:
    def step(qkv: torch.Tensor) -> torch.Tensor:
        q, k, v = repkv(qkv, 8, 2).unbind(2)
        return (q * k + v).sum()

    qkv = torch.randn(2, 3, 12, 4, requires_grad=True)
    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    loss = compiled(qkv)
    loss.backward()
    qkv2 = qkv.detach().clone().requires_grad_(True)
    expected = step(qkv2)
    expected.backward()
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(qkv.grad, qkv2.grad)


def test_meta_tensors_get_shapes_without_running() -> None:
    dout = torch.empty(4, 16, 3, 32, 128, device="meta", dtype=torch.bfloat16)
    dinp = torch.ops.repkv_tune.repkv_backward(dout, 8)
    assert dinp.shape == (4, 16, 48, 128) and dinp.device.type == "meta"
    assert repkv(torch.empty(4, 16, 48, 128, device="meta"), 32, 8).shape == (4, 16, 3, 32, 128)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: repkv_backward(torch.randn(2, 3, 2, 8, 4), 2), r"\(B, T, 3, NH, HD\)"),
        (lambda: repkv_backward(torch.randn(2, 3, 3, 8, 4), 3), "not divisible"),
        (lambda: repkv_backward(torch.randn(2, 3, 3, 8, 4), 0), "NH_KV must be >= 1, got 0"),
        # NH = 0 passed (0 % NH_KV == 0): dinp of zero query heads and K/V heads of zeros
        (lambda: repkv_backward(torch.randn(2, 3, 3, 0, 4), 2), r"NH >= 1 heads .*got \(2, 3, 3, 0, 4\)"),
        (lambda: repkv(torch.randn(2, 3, 11, 4), 8, 2), "NH \\+ 2\\*NH_KV = 12"),
        (lambda: repkv(torch.randn(2, 3, 12, 4), 8, 0), "positive multiple"),
        (lambda: repkv_backward(torch.randn(2, 3, 3, 8, 4), 2, out=torch.empty(2, 3, 12, 5)), "out must be"),
        (
            lambda: repkv_backward(
                torch.randn(2, 3, 3, 8, 4), 2, out=torch.empty(2, 3, 4, 12).transpose(2, 3)
            ),
            "contiguous",
        ),
        # served() raised KeyError: torch.float64, and IndexError for a shape of fewer values
        (lambda: served((8, 1024, 32, 8, 128), torch.float64), "no tuned kernel serves torch.float64"),
        (lambda: served((8, 1024, 32, 8), torch.bfloat16), r"\(B, T, NH, NH_KV, HD\); got 4 values"),
        # served() answered "copy" for any NH == NH_KV, negative heads included
        (lambda: served((8, 1024, -1, -1, 128), torch.bfloat16), "NH must be >= 1, got -1"),
        (lambda: served((8, 1024, 32, 30, 128), torch.bfloat16), "NH=32 is not divisible by NH_KV=30"),
        (
            lambda: served((8, 1024, 32, 32, 127), torch.bfloat16, op="rope_repkv_forward"),
            "rope_repkv_forward cannot run B=8,T=1024,NH=32,NH_KV=32,HD=127: HD=127 is odd",
        ),
        (lambda: served((8, 1024, 32, 8, 128), torch.bfloat16, op="rope"), "unknown op 'rope'"),
    ],
)
def test_bad_arguments_get_a_clear_error(call, message) -> None:
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize(
    ("call", "message"),
    [
        # before: PyTorch's multi-line schema error for a float, and True taken as NH_KV = 1
        (lambda: repkv_backward(torch.randn(2, 3, 3, 8, 4), 2.0), "NH_KV must be an integer, got 2.0"),
        (lambda: repkv_backward(torch.randn(2, 3, 3, 8, 4), True), "NH_KV must be an integer, got True"),
        (lambda: repkv(torch.randn(2, 3, 12, 4), 8.0, 2), "NH must be an integer, got 8.0"),
        (lambda: repkv(torch.randn(2, 3, 12, 4), 8, "2"), "NH_KV must be an integer, got '2'"),
    ],
)
def test_a_head_count_that_is_not_an_integer_is_a_type_error(call, message) -> None:
    with pytest.raises(TypeError, match=message):
        call()


def test_integer_scalars_of_numpy_and_torch_are_head_counts() -> None:
    import numpy as np

    dout = torch.randn(2, 3, 3, 8, 4)
    expected = reference_backward(dout, 2)
    assert torch.equal(repkv_backward(dout, np.int64(2)), expected)
    assert torch.equal(repkv_backward(dout, torch.tensor(2)), expected)


def test_served_without_a_cuda_device_says_so(monkeypatch) -> None:
    # it ended in PyTorch's AssertionError traceback ('Torch not compiled with CUDA enabled')
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(
        RuntimeError, match="compiles repkv_backward's kernel for a CUDA device, and PyTorch sees none"
    ):
        served((8, 1024, 32, 8, 128), torch.bfloat16)
    assert served((8, 1024, 32, 32, 128), torch.bfloat16) == ("copy", "copy", ())  # a copy needs no kernel


# --- the race and its recording, on a fake bench (the CUDA timing is tested on a GPU) ---------
