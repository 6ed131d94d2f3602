"""repkv backward written in PyTorch, as a user would instead of using this project: several
formulations, run eagerly or through `torch.compile` specialized to one shape.

Every formulation maps a contiguous dout of B*T*3*NH*HD elements to a new dinp tensor
(B, T, NH + 2*NH_KV, HD) of dout's dtype; the shape ints are plain Python ints, so a
`dynamic=False` compile specializes on them. This module imports torch, never cupy; the peers
benchmark (`scripts/bench_kernels.py`) and its tests import it, and the CuPy bridge
(`tuner.runners.gpu.peers`) and the op's race read TORCH_DTYPES from it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

Formulation = Callable[[torch.Tensor, int, int, int, int, int], torch.Tensor]

TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def sum_cat(dout: torch.Tensor, B: int, T: int, NH: int, NH_KV: int, HD: int) -> torch.Tensor:
    """(a) Slice K and V, sum their replicas in the native dtype, cat after Q."""
    d = dout.view(B, T, 3, NH, HD)
    kv = d[:, :, 1:].reshape(B, T, 2, NH_KV, NH // NH_KV, HD).sum(dim=4)
    return torch.cat([d[:, :, 0], kv.reshape(B, T, 2 * NH_KV, HD)], dim=2)


def repeat_kv_backward(dout: torch.Tensor, B: int, T: int, NH: int, NH_KV: int, HD: int) -> torch.Tensor:
    """(b) What autograd computes through HF-style `repeat_kv` (expand + reshape) and the split
    of the packed qkv: reshape's backward is a view, expand's a sum over the replica dim,
    split's a cat."""
    d = dout.view(B, T, 3, NH, HD)
    nrep = NH // NH_KV
    dq, dk, dv = d.unbind(2)
    dk = dk.reshape(B, T, NH_KV, nrep, HD).sum(dim=3)
    dv = dv.reshape(B, T, NH_KV, nrep, HD).sum(dim=3)
    return torch.cat([dq, dk, dv], dim=2)


def fp32_sum_cat(dout: torch.Tensor, B: int, T: int, NH: int, NH_KV: int, HD: int) -> torch.Tensor:
    """(c) As (a), summing in fp32 and casting back (the benchmark's earlier formulation)."""
    d = dout.view(B, T, 3, NH, HD)
    kv = d[:, :, 1:].reshape(B, T, 2, NH_KV, NH // NH_KV, HD).sum(dim=4, dtype=torch.float32)
    return torch.cat([d[:, :, 0], kv.to(dout.dtype).reshape(B, T, 2 * NH_KV, HD)], dim=2)


def into_slices(dout: torch.Tensor, B: int, T: int, NH: int, NH_KV: int, HD: int) -> torch.Tensor:
    """(d) Eager without the cat's extra pass: copy Q into its slice of an empty dinp and let
    the sum write K and V straight into theirs (`out=` a strided view)."""
    d = dout.view(B, T, 3, NH, HD)
    dinp = dout.new_empty(B, T, NH + 2 * NH_KV, HD)
    dinp[:, :, :NH].copy_(d[:, :, 0])
    kv = d[:, :, 1:].reshape(B, T, 2, NH_KV, NH // NH_KV, HD)
    torch.sum(kv, dim=4, out=dinp[:, :, NH:].view(B, T, 2, NH_KV, HD))
    return dinp


FORMULATIONS: dict[str, Formulation] = {
    "sum_cat": sum_cat,
    "repeat_kv_bwd": repeat_kv_backward,
    "fp32_sum_cat": fp32_sum_cat,
    "into_slices": into_slices,
}
# Which formulations each way of running them gets (compiling costs seconds per shape; the
# fp32 and out= formulations only matter eagerly: Inductor upcasts the sum of 16-bit types
# and writes a cat's inputs into the output itself).
EAGER = ("sum_cat", "repeat_kv_bwd", "fp32_sum_cat", "into_slices")
COMPILED = ("sum_cat", "repeat_kv_bwd")
COMPILE_MODES = ("default", "max-autotune-no-cudagraphs")


def repeat_kv(x: torch.Tensor, nrep: int) -> torch.Tensor:
    """HF's repeat_kv on the (B, T, NH_KV, HD) layout: each K/V head repeated nrep times."""
    B, T, NH_KV, HD = x.shape
    return x[:, :, :, None, :].expand(B, T, NH_KV, nrep, HD).reshape(B, T, NH_KV * nrep, HD)


def autograd_backward(dout: torch.Tensor, B: int, T: int, NH: int, NH_KV: int, HD: int) -> torch.Tensor:
    """The reference for (b): run split + repeat_kv forward on a leaf and backpropagate dout."""
    qkv = torch.zeros(B, T, NH + 2 * NH_KV, HD, dtype=dout.dtype, device=dout.device, requires_grad=True)
    q, k, v = qkv.split([NH, NH_KV, NH_KV], dim=2)
    out = torch.stack([q, repeat_kv(k, NH // NH_KV), repeat_kv(v, NH // NH_KV)], dim=2)
    out.backward(dout.view(B, T, 3, NH, HD))
    return qkv.grad


def configure_dynamo() -> None:
    """Never fall back to eager: a recompile past the limit raises instead (each compile also
    starts from `torch._dynamo.reset()`, so the limit is never near)."""
    config = torch._dynamo.config
    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(config, name):
            setattr(config, name, 64)
    if hasattr(config, "fail_on_recompile_limit_hit"):
        config.fail_on_recompile_limit_hit = True


def compile_formulation(fn: Formulation, mode: str, backend: str = "inductor") -> Callable[..., Any]:
    """`torch.compile` of fn specialized to the shape it is first called with (dynamic=False),
    whole graph or an error (fullgraph=True), from a clean Dynamo state. The mode is Inductor's
    (tests trace with another backend, which takes none)."""
    torch._dynamo.reset()
    options: dict[str, Any] = {"mode": mode} if mode != "default" and backend == "inductor" else {}
    return torch.compile(fn, dynamic=False, fullgraph=True, backend=backend, **options)


def graphs_compiled() -> int:
    """Graphs Dynamo has compiled in this process (a recompile adds one)."""
    return int(torch._dynamo.utils.counters["stats"]["unique_graphs"])


def kernels_generated() -> int:
    """Kernels Inductor has generated in this process."""
    from torch._inductor import metrics

    return int(metrics.generated_kernel_count)


@dataclass(frozen=True)
class FirstCall:
    result: torch.Tensor
    seconds: float  # wall time of the first call, compile included
    graphs: int  # Dynamo graphs compiled by it (1 for a whole-graph compile)
    kernels: int  # Inductor kernels generated by it


def first_call(call: Callable[[], torch.Tensor]) -> FirstCall:
    """Run a compiled call once (compiling it), counting what was compiled."""
    graphs, kernels = graphs_compiled(), kernels_generated()
    start = time.perf_counter()
    result = call()
    if result.is_cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    return FirstCall(result, seconds, graphs_compiled() - graphs, kernels_generated() - kernels)
