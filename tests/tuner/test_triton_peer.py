"""The Triton peer on the CPU, through Triton's interpreter (TRITON_INTERPRET=1): every tile
config and the autotuned call against the numpy float64 reference, in fp32, bf16 and fp16.
Skipped where triton (or torch) is not installed."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from variants import DTYPES, Shape
from variants.reference import nan_bits, random_input, validate_output

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

SHAPES = [
    Shape(2, 3, 8, 2, 16),
    Shape(1, 5, 4, 4, 80),  # nrep = 1, HD not a power of two
    Shape(2, 4, 6, 1, 72),  # NH_KV = 1
    Shape(1, 3, 28, 4, 160),  # nrep = 7
    Shape(1, 2, 16, 8, 256),
]
TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


@pytest.fixture(scope="module")
def tp():
    """tuner.runners.gpu.triton_peer with its kernel built for the interpreter (the decorators read
    TRITON_INTERPRET when the module is executed)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRITON_INTERPRET", "1")
        module = importlib.reload(importlib.import_module("tuner.runners.gpu.triton_peer"))
        yield module


def to_torch(storage: np.ndarray, dtype_name: str):
    if dtype_name == "bf16":
        return torch.from_numpy(storage.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(storage.copy())


def to_storage(tensor, dtype_name: str) -> np.ndarray:
    if dtype_name == "bf16":
        return tensor.view(torch.int16).numpy().view(np.uint16).ravel()
    return tensor.numpy().ravel()


def poisoned(shape: Shape, dtype_name: str):
    """dinp filled with the NaN bit pattern the GPU checks use."""
    bits = nan_bits(DTYPES[dtype_name])
    if dtype_name == "fp32":
        return torch.full((shape.dinp_numel,), bits, dtype=torch.int32).view(torch.float32)
    return torch.full((shape.dinp_numel,), bits, dtype=torch.int16).view(TORCH_DTYPES[dtype_name])


def check(shape: Shape, dtype_name: str, run) -> None:
    dtype = DTYPES[dtype_name]
    dout = random_input(shape, dtype, seed=3)
    dinp = poisoned(shape, dtype_name)
    run(to_torch(dout, dtype_name), dinp)
    result = validate_output(to_storage(dinp, dtype_name), dout, shape, dtype)
    assert result.ok, result.summary()


@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_every_tile_config_matches_the_reference(tp, shape: Shape, dtype_name: str) -> None:
    bd = tp.block_d(shape.HD)
    tried = 0
    for elements, warps in tp.TILE_CONFIGS:
        if elements < bd:
            continue
        bt = tp.block_t(elements, shape.HD)
        grid = (-(-shape.tokens // bt), shape.heads_in)

        def run(dout, dinp, elements=elements, warps=warps, grid=grid):
            tp.repkv_backward_kernel[grid](
                dinp,
                dout,
                shape.tokens,
                shape.NH,
                shape.NH_KV,
                shape.HD,
                shape.nrep,
                bd,
                ELEMS=elements,
                num_warps=warps,
            )

        check(shape, dtype_name, run)
        tried += 1
    assert tried >= 3


@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_autotuned_call_matches_the_reference(tp, shape: Shape, dtype_name: str) -> None:
    """Through triton.autotune with a fake benchmark that prefers the last config it times."""
    timed = []

    def fake_bench(kernel_call, quantiles):
        kernel_call()
        timed.append(1)
        return [1.0 / len(timed), 1.0, 1.0]

    kernel = tp.make_autotuned(do_bench=fake_bench)

    def run(dout, dinp):
        tp.repkv_backward_triton(dout, dinp, *shape.as_dict().values(), kernel=kernel)

    check(shape, dtype_name, run)
    chosen = tp.chosen_config(kernel)
    assert chosen.startswith("ELEMS=") and "num_warps=" in chosen
    assert chosen.endswith(f"num_warps={kernel.best_config.num_warps}")
    if len(timed) > 1:  # the winner is the fastest by the fake benchmark: the last one timed
        assert (
            kernel.best_config
            == tp.prune_configs(
                tp.tile_configs(),
                {
                    "HD": shape.HD,
                    "tokens": shape.tokens,
                    "dout_ptr": torch.empty(0, dtype=TORCH_DTYPES[dtype_name]),
                },
            )[-1]
        )


def test_pruning_keeps_tiles_of_whole_heads_with_16_bytes_per_thread(tp) -> None:
    def kept(HD: int, tokens: int, dtype) -> list[tuple[int, int]]:
        args = {"HD": HD, "tokens": tokens, "dout_ptr": torch.empty(0, dtype=dtype)}
        return [(c.kwargs["ELEMS"], c.num_warps) for c in tp.prune_configs(tp.tile_configs(), args)]

    assert kept(128, 8192, torch.bfloat16) == list(tp.TILE_CONFIGS)
    # fp32, 4 warps: 1024 elements are 32 bytes a thread; a 2048-wide head leaves out the smaller tiles
    assert all(e >= 2048 for e, _ in kept(2048, 8192, torch.float32))
    # a tile far taller than the tokens there are goes
    assert all(e // 128 <= 2 * 2 for e, _ in kept(128, 2, torch.float32))
    # nothing fits: one head-wide tile of 4 warps
    assert kept(4096, 1, torch.float32) == [(4096, 4)] or kept(4096, 1, torch.float32)


def test_shape_mismatches_are_refused(tp) -> None:
    shape = Shape(1, 2, 4, 2, 16)
    dout = torch.zeros(shape.dout_numel)
    with pytest.raises(ValueError, match="element count"):
        tp.repkv_backward_triton(dout, torch.zeros(shape.dinp_numel + 1), *shape.as_dict().values())
    with pytest.raises(ValueError, match="one dtype"):
        tp.repkv_backward_triton(
            dout, torch.zeros(shape.dinp_numel, dtype=torch.float16), *shape.as_dict().values()
        )
    with pytest.raises(ValueError, match="divisible"):
        tp.repkv_backward_triton(dout, torch.zeros(shape.dinp_numel), 1, 2, 4, 3, 16)


def test_the_empty_kernel_launches_and_touches_nothing(tp) -> None:
    sink = torch.full((4,), 7.0)
    tp.empty_kernel[(1,)](sink)
    assert torch.equal(sink, torch.full((4,), 7.0))
