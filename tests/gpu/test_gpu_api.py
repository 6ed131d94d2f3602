"""On the GPU: the Python API as a user calls it (`import repkv_tune`), not through torch.ops:
every dtype, exact and nearest shapes, a CuPy array by DLPack, the wrapper itself under
torch.compile(fullgraph=True) and inside CUDA graph capture."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import repkv_tune  # noqa: E402

pytestmark = pytest.mark.gpu

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
TOLERANCE = {torch.float32: (1e-5, 1e-5), torch.bfloat16: (2e-2, 1.6e-2), torch.float16: (2e-3, 2e-3)}


@pytest.mark.parametrize("shape", [(8, 1024, 32, 8, 128), (2, 333, 32, 8, 96)], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_the_public_wrapper_on_each_dtype(shape, dtype) -> None:
    B, T, NH, NH_KV, HD = shape
    dout = torch.randn(B, T, 3, NH, HD, device="cuda", dtype=dtype)
    dinp = repkv_tune.repkv_backward(dout, NH_KV)
    assert dinp.shape == (B, T, NH + 2 * NH_KV, HD) and dinp.dtype == dtype
    atol, rtol = TOLERANCE[dtype]
    expected = repkv_tune.reference_backward(dout.double(), NH_KV)
    torch.testing.assert_close(dinp.double(), expected, atol=atol, rtol=rtol)
    _, match, _ = repkv_tune.served(shape, dtype)
    assert match in ("exact", "nearest", "raced")


def test_a_cupy_array_by_dlpack() -> None:
    cp = pytest.importorskip("cupy")
    dout = cp.random.standard_normal((2, 64, 3, 32, 128), dtype=cp.float32)
    dinp = cp.from_dlpack(repkv_tune.repkv_backward(torch.from_dlpack(dout), 8))
    expected = repkv_tune.reference_backward(torch.from_dlpack(dout).double().cpu(), 8)
    torch.testing.assert_close(torch.from_dlpack(dinp).double().cpu(), expected, atol=1e-5, rtol=1e-5)


def test_the_public_wrapper_compiles_with_fullgraph_on_cuda() -> None:
    dout = torch.randn(2, 128, 3, 32, 128, device="cuda", dtype=torch.bfloat16)
    torch._dynamo.reset()
    compiled = torch.compile(
        lambda x: repkv_tune.repkv_backward(x, 8).float() * 2, fullgraph=True, dynamic=False
    )
    expected = 2 * repkv_tune.reference_backward(dout.double(), 8)
    torch.testing.assert_close(compiled(dout).double(), expected, atol=4e-2, rtol=1.6e-2)


def test_the_public_wrapper_captures_in_a_cuda_graph() -> None:
    dout = torch.randn(2, 512, 3, 32, 128, device="cuda", dtype=torch.float16)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        repkv_tune.repkv_backward(dout, 8)  # compile and pack before capture, as PyTorch asks
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        dinp = repkv_tune.repkv_backward(dout, 8)
    dout.copy_(torch.randn_like(dout))
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(
        dinp.double(), repkv_tune.reference_backward(dout.double(), 8), atol=2e-3, rtol=2e-3
    )
