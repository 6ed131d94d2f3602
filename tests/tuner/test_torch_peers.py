"""The PyTorch formulations of the peers benchmark, on CPU tensors: each against the numpy float64
reference, (b) against autograd itself, and torch.compile specialized to one shape at a time."""

from __future__ import annotations

import numpy as np
import pytest

from variants import DTYPES, Shape
from variants.reference import random_input, validate_output

torch = pytest.importorskip("torch")
torch_peers = pytest.importorskip("tuner.runners.gpu.torch_peers")

SHAPES = [
    Shape(2, 5, 8, 2, 16),
    Shape(1, 3, 4, 4, 80),  # nrep = 1
    Shape(2, 4, 6, 1, 72),  # NH_KV = 1
    Shape(1, 3, 28, 4, 160),  # nrep = 7
    Shape(3, 2, 16, 8, 256),
]
TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def to_torch(storage: np.ndarray, dtype_name: str) -> torch.Tensor:
    if dtype_name == "bf16":
        return torch.from_numpy(storage.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(storage.copy())


def to_storage(tensor: torch.Tensor, dtype_name: str) -> np.ndarray:
    if dtype_name == "bf16":
        return tensor.contiguous().view(torch.int16).numpy().view(np.uint16).ravel()
    return tensor.contiguous().numpy().ravel()


def dims(shape: Shape) -> tuple[int, int, int, int, int]:
    return (shape.B, shape.T, shape.NH, shape.NH_KV, shape.HD)


@pytest.mark.parametrize("name", list(torch_peers.FORMULATIONS))
@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_formulation_matches_the_reference(name: str, dtype_name: str, shape: Shape) -> None:
    dtype = DTYPES[dtype_name]
    dout = random_input(shape, dtype, seed=7)
    dinp = torch_peers.FORMULATIONS[name](to_torch(dout, dtype_name), *dims(shape))
    assert dinp.shape == (shape.B, shape.T, shape.heads_in, shape.HD)
    assert dinp.dtype == TORCH_DTYPES[dtype_name] and dinp.is_contiguous()
    result = validate_output(to_storage(dinp, dtype_name), dout, shape, dtype)
    assert result.ok, result.summary()


def test_the_validator_catches_a_formulation_that_drops_the_last_replica() -> None:
    shape = Shape(2, 3, 8, 2, 16)
    dout = random_input(shape, DTYPES["fp32"], seed=1)
    d = torch.from_numpy(dout).view(2, 3, 3, 8, 16)
    kv = d[:, :, 1:].reshape(2, 3, 2, 2, 4, 16)[:, :, :, :, :3].sum(dim=4)
    wrong = torch.cat([d[:, :, 0], kv.reshape(2, 3, 4, 16)], dim=2)
    assert not validate_output(to_storage(wrong, "fp32"), dout, shape, DTYPES["fp32"]).ok


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", SHAPES[:3], ids=str)
def test_repeat_kv_backward_is_what_autograd_computes(dtype, shape: Shape) -> None:
    dout = torch.randn(shape.dout_numel).to(dtype)
    expected = torch_peers.autograd_backward(dout, *dims(shape))
    got = torch_peers.repeat_kv_backward(dout, *dims(shape))
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


def test_repeat_kv_repeats_each_head_nrep_times_in_order() -> None:
    x = torch.arange(2 * 3 * 2 * 4, dtype=torch.float32).view(2, 3, 2, 4)
    y = torch_peers.repeat_kv(x, 3)
    assert y.shape == (2, 3, 6, 4)
    for head in range(6):
        torch.testing.assert_close(y[:, :, head], x[:, :, head // 3])


@pytest.mark.parametrize("name", torch_peers.COMPILED)
def test_compiled_whole_graph_once_per_shape_never_eager(name: str) -> None:
    """dynamic=False, fullgraph=True: one graph per shape, from a reset Dynamo, and the timed
    calls that follow compile nothing more (aot_eager: the graph capture, without a compiler)."""
    torch_peers.configure_dynamo()
    for shape in SHAPES[:3]:
        compiled = torch_peers.compile_formulation(
            torch_peers.FORMULATIONS[name], "default", backend="aot_eager"
        )
        dout = torch.randn(shape.dout_numel)
        first = torch_peers.first_call(
            lambda compiled=compiled, dout=dout, shape=shape: compiled(dout, *dims(shape))
        )
        assert first.graphs == 1 and first.seconds > 0
        torch.testing.assert_close(first.result, torch_peers.FORMULATIONS[name](dout, *dims(shape)))
        before = torch_peers.graphs_compiled()
        for _ in range(3):
            compiled(torch.randn(shape.dout_numel), *dims(shape))
        assert torch_peers.graphs_compiled() == before


def test_dynamo_is_told_to_fail_rather_than_fall_back() -> None:
    torch_peers.configure_dynamo()
    config = torch._dynamo.config
    if hasattr(config, "fail_on_recompile_limit_hit"):
        assert config.fail_on_recompile_limit_hit is True
    assert getattr(config, "recompile_limit", getattr(config, "cache_size_limit", 0)) >= 64
