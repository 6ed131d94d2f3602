"""A pair's sides in the graph benchmark: the tuned kernel as served cold and, where the store
has one, as served fed; the store's leading configurations (`--configs`); the Triton kernel;
torch.compile of two formulations in two modes, each validated against a float64 reference;
then the copy and the empty kernel."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from repkv_tune.ops import reference_backward, repkv_backward
from results.index import shape_tuple
from results.selection import select
from tuner.runners.gpu import triton_peer
from tuner.runners.gpu.peers import as_storage, cupy_stream
from tuner.runners.gpu.torch_peers import TORCH_DTYPES, compile_formulation, repeat_kv_backward, sum_cat
from variants import DType, InvalidConfig, Shape
from variants.compile_cupy import CompileError

from .arithmetic import COMPILE_MODES
from .gpu import Gpu
from .selection import leaders, plain_twin


@dataclass
class Pair:
    sides: dict[str, Callable[[], Any]]  # by name, in the order they are measured
    configs: dict[str, str]  # the configuration's key of the sides that have one
    dout: torch.Tensor  # what every side reads


def on_torch_stream(run: Callable[[], None]) -> Callable[[], None]:
    def call() -> None:  # CuPy launches on its current stream: PyTorch's, captured or not
        with cupy_stream(torch.cuda.current_stream()):
            run()

    return call


def pair_sides(gpu: Gpu, args: argparse.Namespace, shape: Shape, dtype: DType) -> Pair:
    """The pair's sides over one dout and dinp, each validated (a wrong result raises)."""
    dims = (shape.B, shape.T, shape.NH, shape.NH_KV, shape.HD)
    name = dtype.name
    index, kernels, sm_count = gpu.index, gpu.kernels, gpu.sm_count
    served = select(index, args.gpu, shape, dtype)
    dout = torch.randn(shape.B, shape.T, 3, shape.NH, shape.HD, device="cuda").to(TORCH_DTYPES[name])
    dinp = torch.empty(shape.B, shape.T, shape.heads_in, shape.HD, device="cuda", dtype=dout.dtype)
    half = shape.bytes_moved(dtype) // 2
    src = torch.ones(half, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    sides: dict[str, Callable[[], Any]] = {
        "tuned": lambda: repkv_backward(dout, shape.NH_KV, out=dinp),
        "triton:autotune": lambda: triton_peer.repkv_backward_triton(dout, dinp, *dims),
    }
    configs: dict[str, str] = {"tuned": served.candidate.config.key}
    group = index.groups.get((args.gpu, shape_tuple(shape), name))
    storage = (as_storage(dinp, dtype), as_storage(dout, dtype))  # the same memory, for CuPy
    fed = select(gpu.fed_index, args.gpu, shape, dtype)
    # what GET /best?l2=fed serves (tuned with python -m tuner --l2 fed)
    if fed is not None and fed.group.l2 == "fed":
        fed_config = fed.candidate.config
        run = kernels.launcher(shape, dtype, fed_config, sm_count, *storage)
        sides["tuned:fed"] = on_torch_stream(run)
        configs["tuned:fed"] = fed_config.key
    for rank, leader in leaders(group, args.configs):
        twin = plain_twin(leader)
        for side, config in ((f"store#{rank}", leader), (f"store#{rank}:plain", twin)):
            if config is None:
                continue
            try:
                run = kernels.launcher(shape, dtype, config, sm_count, *storage)
            except (CompileError, InvalidConfig) as exc:  # a row the current code cannot build
                print(f"{shape.key} {name} {side} left out: {exc}", flush=True)
                continue
            sides[side] = on_torch_stream(run)
            configs[side] = config.key
    for short, mode in COMPILE_MODES.items():
        for label, formulation in (("sum_cat", sum_cat), ("repeat_kv_bwd", repeat_kv_backward)):
            compiled = compile_formulation(formulation, mode)
            sides[f"compile[{short}]:{label}"] = lambda c=compiled: c(dout, *dims)
    expected = reference_backward(dout.double(), shape.NH_KV)
    tolerance = 1e-5 if name == "fp32" else 2e-2
    for call in sides.values():
        dinp.fill_(float("nan"))
        result = call()
        got = (dinp if result is None or result.data_ptr() == dinp.data_ptr() else result).double()
        torch.testing.assert_close(got.view_as(expected), expected, rtol=tolerance, atol=tolerance)
    sides["copy"] = lambda: dst.copy_(src)
    sides["empty"] = lambda: triton_peer.empty_kernel[(1,)](gpu.sink)
    torch.cuda.synchronize()
    return Pair(sides, configs, dout)
