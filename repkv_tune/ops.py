"""The tuned repkv backward as PyTorch operators, for attention kernels that need K and V
replicated to every query head (custom or older kernels, llm.c ports). Attention that
handles grouped-query itself (`F.scaled_dot_product_attention(..., enable_gqa=True)`) needs
no replication at all: see the README's step-time table before using this.

    from repkv_tune import repkv, repkv_backward
    qkv = proj(x).view(B, T, NH + 2 * NH_KV, HD)
    q, k, v = repkv(qkv, NH, NH_KV).unbind(2)       # (B, T, 3, NH, HD); backward is tuned
    dinp = repkv_backward(dout, NH_KV)               # the backward alone; out= to reuse memory

Both are `torch.library` custom ops (`torch.ops.repkv_tune.repkv`,
`torch.ops.repkv_tune.repkv_backward`, `torch.ops.repkv_tune.repkv_backward_out`) with fake
implementations, so `torch.compile(fullgraph=True)` traces through them. On a CUDA tensor
the backward launches the tuned kernel on `torch.cuda.current_stream()`, into memory from
PyTorch's caching allocator, so it runs inside CUDA graph capture. Its configuration is
`results.selection.select`'s for this GPU (exact, else nearest tuned shape; another GPU's
results only where this one has none; a generic configuration where nothing serves). The
kernel is compiled (CuPy, NVRTC) and its launch arguments packed on the first call per
(shape, dtype, device): make that call before capturing a graph, as PyTorch asks of every
captured operation. CPU and float64 tensors take a plain PyTorch path (for tests and
gradcheck). This module imports cupy only on a CUDA call; importing it needs torch alone.

A shape nobody tuned races its shortlist on the first call (`tuner.race` decides, from
CUDA-event timings taken by `repkv_tune.race`; REPKV_RACE=0 turns it off, and nothing races during graph
capture). With REPKV_RECORD=1 or `record_races()` the race's measurements are written as
trial rows of this process's own run (`tuner.race_record`), which later loads serve from.

Configurations are chosen for dout just written by the kernel before, as in a training step
(each shape's ranking tuned with `python -m tuner --l2 fed` where it has one, its cold one
elsewhere); REPKV_L2=cold chooses by the cold rankings alone.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from repkv_tune.launcher import Launcher, compile_launcher
from repkv_tune.race import L2, RACE, record_races
from repkv_tune.race import race as _race
from variants.family import ALIGNMENT

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)

_DTYPE_NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


def _check(dout_shape: tuple[int, ...], NH_KV: int) -> tuple[int, int, int, int, int]:
    if len(dout_shape) != 5 or dout_shape[2] != 3:
        raise ValueError(f"dout must be (B, T, 3, NH, HD); got {tuple(dout_shape)}")
    B, T, _, NH, HD = dout_shape
    if NH_KV < 1 or NH % NH_KV:
        raise ValueError(f"NH={NH} is not divisible by NH_KV={NH_KV}")
    return B, T, NH, NH_KV, HD


def _check_qkv(qkv_shape: tuple[int, ...], NH: int, NH_KV: int) -> None:
    if NH_KV < 1 or NH < 1 or NH % NH_KV:
        raise ValueError(f"NH={NH} must be a positive multiple of NH_KV={NH_KV}")
    if len(qkv_shape) != 4 or qkv_shape[2] != NH + 2 * NH_KV:
        raise ValueError(f"qkv must be (B, T, NH + 2*NH_KV = {NH + 2 * NH_KV}, HD); got {tuple(qkv_shape)}")


# --- the reference path (CPU, float64) -------------------------------------------------------
def reference_backward(dout: torch.Tensor, NH_KV: int) -> torch.Tensor:
    """dinp[..., :NH] = dout[:, :, 0]; K and V: the sum over each head's nrep replicas."""
    B, T, NH, NH_KV, HD = _check(tuple(dout.shape), NH_KV)
    kv = dout[:, :, 1:].reshape(B, T, 2, NH_KV, NH // NH_KV, HD).sum(4)
    return torch.cat([dout[:, :, 0], kv.reshape(B, T, 2 * NH_KV, HD)], dim=2)


# --- the tuned CUDA path ---------------------------------------------------------------------
class _Launchers:
    """Launchers per (shape, dtype, device index), and the results index they are chosen
    from (loaded once, on the first CUDA call)."""

    def __init__(self, results: Path | None = None) -> None:
        self.results = results
        self._by_key: dict[tuple, Launcher] = {}
        self._index = None
        self._lock = threading.Lock()

    def index(self):
        if self._index is None:
            from results.index import build_index
            from results.store import load_results, read_dirs

            frame, report = load_results(read_dirs(self.results))
            self._index = build_index(frame, report)
        return self._index

    def get(self, key: tuple) -> Launcher:
        launcher = self._by_key.get(key)
        if launcher is None:
            with self._lock:
                launcher = self._by_key.get(key) or self._build(*key)
                self._by_key[key] = launcher
        return launcher

    def _build(self, shape_tuple: tuple[int, ...], dtype_name: str, device: int) -> Launcher:
        from results.selection import generic_config, shortlist
        from tuner.gpus import InvalidGpuLabel, default_label
        from variants import Shape, get_dtype, runs_on

        shape, dtype = Shape(*shape_tuple), get_dtype(dtype_name)
        name = torch.cuda.get_device_name(device)
        try:
            gpu = default_label(name)
        except InvalidGpuLabel:
            gpu = ""
        # REPKV_L2's rankings where the shape was tuned so (an unknown state: ValueError here)
        index = self.index().in_state(L2)
        listed = shortlist(index, gpu, shape, dtype, other_gpus=True) if gpu else []
        major, minor = torch.cuda.get_device_capability(device)
        listed = [c for c in listed if runs_on(c.candidate.config, 10 * major + minor)]  # borrowed ones
        if not listed:
            config = generic_config(shape, dtype)
            log.warning("nothing tuned serves %s %s on %s; using %s", shape, dtype.name, name, config.key)
            return compile_launcher(shape, dtype, config, device, "generic")
        if listed[0].group.gpu != gpu:
            log.warning(
                "no results for %s; using %s's configurations for %s", gpu, listed[0].group.gpu, shape
            )
        launchers = [compile_launcher(shape, dtype, c.candidate.config, device, c.match) for c in listed]
        if len(launchers) == 1 or not RACE or torch.cuda.is_current_stream_capturing():
            return launchers[0]
        return _race(launchers, shape, dtype, device, gpu)


# Race the shortlisted configurations of an untuned shape on its first call (REPKV_RACE=0: no).
LAUNCHERS = _Launchers()


# (dout shape, dtype, device index, NH_KV) -> (launcher or None for B*T = 0, dinp shape): what
# a call needs once its arguments were checked, found with one dictionary lookup.
_PLANS: dict[tuple, tuple[Launcher | None, tuple[int, int, int, int]]] = {}


def _plan(dout: torch.Tensor, NH_KV: int, device: int) -> tuple[Launcher | None, tuple[int, int, int, int]]:
    key = (dout.shape, dout.dtype, device, NH_KV)
    found = _PLANS.get(key)
    if found is None:
        B, T, NH, NH_KV, HD = _check(tuple(dout.shape), NH_KV)
        launcher = None
        if B * T:
            launcher = LAUNCHERS.get(((B, T, NH, NH_KV, HD), _DTYPE_NAMES[dout.dtype], device))
        found = _PLANS.setdefault(key, (launcher, (B, T, NH + 2 * NH_KV, HD)))
    return found


def _launch(launcher: Launcher | None, dinp: torch.Tensor, dout: torch.Tensor, device: int) -> None:
    if launcher is None:
        return
    stream = torch._C._cuda_getCurrentRawStream(device)
    if device == torch._C._cuda_getDevice():
        launcher(dinp.data_ptr(), dout.data_ptr(), stream)
    else:
        with torch.cuda.device(device):
            launcher(dinp.data_ptr(), dout.data_ptr(), stream)


def _tuned(dout: torch.Tensor) -> bool:
    return dout.is_cuda and dout.dtype in _DTYPE_NAMES


def _backward_into(dinp: torch.Tensor, dout: torch.Tensor, NH_KV: int) -> None:
    if _tuned(dout):
        dout = _aligned(dout)
        device = dout.get_device()
        _launch(_plan(dout, NH_KV, device)[0], dinp, dout, device)
    else:
        dinp.copy_(reference_backward(dout, NH_KV))


def _check_out(out: torch.Tensor, dout: torch.Tensor, expected: tuple[int, ...]) -> None:
    if tuple(out.shape) != tuple(expected) or out.dtype != dout.dtype or out.device != dout.device:
        raise ValueError(
            f"out must be a {dout.dtype} tensor of shape {tuple(expected)} on {dout.device}; "
            f"got {out.dtype} {tuple(out.shape)} on {out.device}"
        )
    if not out.is_contiguous():
        raise ValueError("out must be contiguous")
    if out.is_cuda and out.data_ptr() % ALIGNMENT:
        raise ValueError(
            f"out must start on a {ALIGNMENT}-byte boundary (the tuned kernels move 16-byte words); "
            f"it starts {out.data_ptr() % ALIGNMENT} bytes past one (a view at an offset?)"
        )


def _aligned(dout: torch.Tensor) -> torch.Tensor:
    """dout, contiguous and starting on a 16-byte boundary (a copy where it is not: a view at an
    odd offset would make a 16-byte load fault)."""
    if not dout.is_contiguous():
        dout = dout.contiguous()
    return dout.clone() if dout.data_ptr() % ALIGNMENT else dout


def _eager_ok(dout: torch.Tensor) -> bool:
    """A plain CUDA tensor with no tracing or dispatch mode around it: the op's body can run
    without PyTorch's dispatcher (the same launch, a fraction of the CPU cost)."""
    return (
        type(dout) is torch.Tensor
        and dout.is_cuda
        and dout.dtype in _DTYPE_NAMES
        and not torch._C._len_torch_dispatch_stack()
        and not torch._C._is_torch_function_mode_enabled()
    )


def _eager_backward(dout: torch.Tensor, NH_KV: int, out: torch.Tensor | None) -> torch.Tensor:
    dout = _aligned(dout)
    device = dout.get_device()
    launcher, shape = _plan(dout, NH_KV, device)
    if out is None:
        out = dout.new_empty(shape)
    else:
        _check_out(out, dout, shape)
    _launch(launcher, out, dout, device)
    return out


# --- the operators ----------------------------------------------------------------------------
def _dinp_shape(dout: torch.Tensor, NH_KV: int) -> tuple[int, int, int, int]:
    B, T, NH, NH_KV, HD = _check(tuple(dout.shape), NH_KV)
    return B, T, NH + 2 * NH_KV, HD


@torch.library.custom_op("repkv_tune::repkv_backward", mutates_args=())
def _repkv_backward(dout: torch.Tensor, NH_KV: int) -> torch.Tensor:
    dinp = dout.new_empty(_dinp_shape(dout, NH_KV))
    _backward_into(dinp, dout, NH_KV)
    return dinp


@_repkv_backward.register_fake
def _(dout: torch.Tensor, NH_KV: int) -> torch.Tensor:
    return dout.new_empty(_dinp_shape(dout, NH_KV))


@torch.library.custom_op("repkv_tune::repkv_backward_out", mutates_args=("out",))
def _repkv_backward_out(dout: torch.Tensor, NH_KV: int, out: torch.Tensor) -> None:
    _check_out(out, dout, _dinp_shape(dout, NH_KV))
    _backward_into(out, dout, NH_KV)


@_repkv_backward_out.register_fake
def _(dout: torch.Tensor, NH_KV: int, out: torch.Tensor) -> None:
    return None


def repkv_backward(dout: torch.Tensor, NH_KV: int, out: torch.Tensor | None = None) -> torch.Tensor:
    """dinp (B, T, NH + 2*NH_KV, HD) from dout (B, T, 3, NH, HD): the tuned repkv backward.
    With `out`, writes into it (contiguous, same dtype and device) and returns it.

    On a plain CUDA tensor outside tracing it launches directly; under torch.compile, a
    dispatch mode or on the CPU it goes through the registered operator."""
    # Dynamo reads is_compiling() as True and traces the operator; it never reaches the
    # dispatch-stack query in _eager_ok, which it cannot trace (fullgraph=True would fail).
    if not torch.compiler.is_compiling() and _eager_ok(dout):
        return _eager_backward(dout, NH_KV, out)
    if out is None:
        return torch.ops.repkv_tune.repkv_backward(dout, NH_KV)
    torch.ops.repkv_tune.repkv_backward_out(dout, NH_KV, out)
    return out


_GATHER_INDEX: dict[tuple[int, int, torch.device], torch.Tensor] = {}


def _gather_index(NH: int, NH_KV: int, device: torch.device) -> torch.Tensor:
    """Heads of qkv that make (q heads, k replicated, v replicated): one index_select."""
    key = (NH, NH_KV, device)
    index = _GATHER_INDEX.get(key)
    if index is None:
        h = torch.arange(NH, device=device)
        nrep = NH // NH_KV
        index = _GATHER_INDEX.setdefault(key, torch.cat([h, NH + h // nrep, NH + NH_KV + h // nrep]))
    return index


@torch.library.custom_op("repkv_tune::repkv", mutates_args=())
def _repkv(qkv: torch.Tensor, NH: int, NH_KV: int) -> torch.Tensor:
    _check_qkv(tuple(qkv.shape), NH, NH_KV)
    B, T, _, HD = qkv.shape
    return qkv.index_select(2, _gather_index(NH, NH_KV, qkv.device)).view(B, T, 3, NH, HD)


@_repkv.register_fake
def _(qkv: torch.Tensor, NH: int, NH_KV: int) -> torch.Tensor:
    _check_qkv(tuple(qkv.shape), NH, NH_KV)
    B, T, _, HD = qkv.shape
    return qkv.new_empty((B, T, 3, NH, HD))


def _setup(ctx, inputs, output) -> None:
    ctx.NH_KV = inputs[2]


def _repkv_grad(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
    return repkv_backward(grad, ctx.NH_KV), None, None


torch.library.register_autograd("repkv_tune::repkv", _repkv_grad, setup_context=_setup)


def repkv(qkv: torch.Tensor, NH: int, NH_KV: int) -> torch.Tensor:
    """llm.c's repkv forward: (B, T, NH + 2*NH_KV, HD) -> (B, T, 3, NH, HD) with each K and V
    head replicated NH / NH_KV times; its backward is the tuned repkv backward."""
    return torch.ops.repkv_tune.repkv(qkv, NH, NH_KV)


def served(
    shape: tuple[int, int, int, int, int], dtype: torch.dtype, device: int = 0
) -> tuple[str, str, tuple[tuple[str, float], ...]]:
    """(configuration key, how it was chosen: "exact" | "nearest" | "raced" | "generic", the
    race's (configuration, median ms) if one was run) of the backward for (B, T, NH, NH_KV,
    HD) on this CUDA device, compiling (and racing) it if needed."""
    launcher = LAUNCHERS.get((tuple(shape), _DTYPE_NAMES[dtype], device))
    return launcher.config_key, launcher.served_from, launcher.race


__all__ = ["record_races", "reference_backward", "repkv", "repkv_backward", "served"]
