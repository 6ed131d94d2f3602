"""The tuned repkv kernels as PyTorch operators, for attention kernels that need K and V
replicated to every query head (custom or older kernels, llm.c ports). Attention that
handles grouped-query itself (`F.scaled_dot_product_attention(..., enable_gqa=True)`) needs
no replication at all: see the README's step-time table before using this.

    from repkv_tune import repkv, repkv_backward
    qkv = proj(x).view(B, T, NH + 2 * NH_KV, HD)
    q, k, v = repkv(qkv, NH, NH_KV).unbind(2)       # (B, T, 3, NH, HD); forward and backward tuned
    dinp = repkv_backward(dout, NH_KV)               # the backward alone; out= to reuse memory

Both are `torch.library` custom ops (`torch.ops.repkv_tune.repkv`,
`torch.ops.repkv_tune.repkv_backward`, `torch.ops.repkv_tune.repkv_backward_out`) with fake
implementations, so `torch.compile(fullgraph=True)` traces through them. On a CUDA tensor
each launches its op's tuned kernel (repkv's forward: `repkv_forward`; the backward:
`repkv_backward`; each a plain device copy where NH == NH_KV) on `torch.cuda.current_stream()`,
into memory from PyTorch's caching allocator, so it runs inside CUDA graph capture. Its configuration is
`results.selection.select`'s for this GPU and op (exact, else nearest tuned shape; another GPU's
results only where this one has none; a generic configuration where nothing serves). The
kernel is compiled (CuPy, NVRTC) and its launch arguments packed on the first call per
(shape, dtype, device): make that call before capturing a graph, as PyTorch asks of every
captured operation. CPU and float64 tensors take a plain PyTorch path (for tests and
gradcheck). This module imports cupy only on a CUDA call; importing it needs torch alone.

A shape nobody tuned races its op's shortlist on the first call (`tuner.runners.race` decides,
from CUDA-event timings taken by `repkv_tune.race` on the op's own inputs; REPKV_RACE=0 turns it
off, and nothing races during graph capture).
With REPKV_RECORD=1 or `record_races()` the race's measurements are written as trial rows of
this process's own run (`tuner.runners.race_record`), which later loads serve from.

Configurations are chosen for dout just written by the kernel before, as in a training step
(each shape's ranking tuned with `python -m tuner --l2 fed` where it has one, its cold one
elsewhere); REPKV_L2=cold chooses by the cold rankings alone.
"""

from __future__ import annotations

import logging
import operator

import torch

import repkv_tune.launcher as _launcher
import variants
from repkv_tune.launcher import Launcher
from repkv_tune.race import record_races
from variants.family import ALIGNMENT

log = logging.getLogger(__name__)


def _whole(value: object) -> int | None:
    """value as an int where it is a whole number (NumPy's and PyTorch's integer scalars too),
    not a bool; else None."""
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def _counts(**heads: object) -> tuple[int, ...]:
    """Head counts as ints, outside tracing: a float, a bool or a non-number is a TypeError
    naming it (the operators' schema would end in PyTorch's own multi-line error, and True
    would pass as 1). Under torch.compile they are left to the schema, as Dynamo hands them."""
    if torch.compiler.is_compiling():
        return tuple(heads.values())  # type: ignore[return-value]
    counts = []
    for name, value in heads.items():
        whole = _whole(value)
        if whole is None:
            raise TypeError(f"{name} must be an integer, got {value!r}")
        counts.append(whole)
    return tuple(counts)


def _check(dout_shape: tuple[int, ...], NH_KV: int) -> tuple[int, int, int, int, int]:
    if len(dout_shape) != 5 or dout_shape[2] != 3:
        raise ValueError(f"dout must be (B, T, 3, NH, HD); got {tuple(dout_shape)}")
    B, T, _, NH, HD = dout_shape
    if NH_KV < 1:
        raise ValueError(f"NH_KV must be >= 1, got {NH_KV}")
    if NH < 1:
        raise ValueError(f"dout must hold NH >= 1 heads (B, T, 3, NH, HD); got {tuple(dout_shape)}")
    if NH % NH_KV:
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
# (dout shape, dtype, device index, NH_KV) -> (launcher or None for B*T = 0, dinp shape): what
# a call needs once its arguments were checked, found with one dictionary lookup.
# COPY where NH == NH_KV: nothing is summed, dinp holds dout's bytes (the header copies too).
COPY = "copy"
_PLANS: dict[tuple, tuple[Launcher | str | None, tuple[int, int, int, int]]] = {}


def _plan(
    dout: torch.Tensor, NH_KV: int, device: int
) -> tuple[Launcher | str | None, tuple[int, int, int, int]]:
    key = (dout.shape, dout.dtype, device, NH_KV)
    found = _PLANS.get(key)
    if found is None:
        B, T, NH, NH_KV, HD = _check(tuple(dout.shape), NH_KV)
        launcher: Launcher | str | None = None
        if B * T and NH == NH_KV:
            launcher = COPY
        elif B * T:
            launcher = _launcher.LAUNCHERS.get(
                ((B, T, NH, NH_KV, HD), _launcher.DTYPE_NAMES[dout.dtype], device)
            )
        found = _PLANS.setdefault(key, (launcher, (B, T, NH + 2 * NH_KV, HD)))
    return found


_tuned = _launcher.tuned


def _backward_into(dinp: torch.Tensor, dout: torch.Tensor, NH_KV: int) -> None:
    if _tuned(dout):
        _launch_or_copy(_plan(dout, NH_KV, dout.get_device())[0], dinp, dout)
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


_aligned = _launcher.aligned


def _eager_ok(dout: torch.Tensor) -> bool:
    """A plain CUDA tensor with no tracing or dispatch mode around it: the op's body can run
    without PyTorch's dispatcher (the same launch, a fraction of the CPU cost)."""
    return (
        type(dout) is torch.Tensor
        and dout.is_cuda
        and dout.dtype in _launcher.DTYPE_NAMES
        and not torch._C._len_torch_dispatch_stack()
        and not torch._C._is_torch_function_mode_enabled()
    )


def _eager_backward(dout: torch.Tensor, NH_KV: int, out: torch.Tensor | None) -> torch.Tensor:
    launcher, shape = _plan(dout, NH_KV, dout.get_device())
    if out is None:
        out = dout.new_empty(shape)
    else:
        _check_out(out, dout, shape)
    _launch_or_copy(launcher, out, dout)
    return out


def _launch_or_copy(launcher: Launcher | str | None, dinp: torch.Tensor, dout: torch.Tensor) -> None:
    if launcher is COPY:
        dinp.view(dout.shape).copy_(dout)
    else:
        _launcher.launch(launcher, dout.get_device(), dinp, _aligned(dout))


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
    (NH_KV,) = _counts(NH_KV=NH_KV)
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


def reference_forward(qkv: torch.Tensor, NH: int, NH_KV: int) -> torch.Tensor:
    """(B, T, 3, NH, HD): q, each K and V head repeated NH / NH_KV times (one index_select)."""
    _check_qkv(tuple(qkv.shape), NH, NH_KV)
    B, T, _, HD = qkv.shape
    return qkv.index_select(2, _gather_index(NH, NH_KV, qkv.device)).view(B, T, 3, NH, HD)


@torch.library.custom_op("repkv_tune::repkv", mutates_args=())
def _repkv(qkv: torch.Tensor, NH: int, NH_KV: int) -> torch.Tensor:
    if not _tuned(qkv):
        return reference_forward(qkv, NH, NH_KV)
    _check_qkv(tuple(qkv.shape), NH, NH_KV)
    B, T, _, HD = qkv.shape
    out = qkv.new_empty((B, T, 3, NH, HD))
    if NH == NH_KV:  # nothing to replicate: the same bytes, copied on the current stream
        out.view(qkv.shape).copy_(qkv)
        return out
    qkv = _aligned(qkv)
    device = qkv.get_device()
    launcher = _launcher.launcher_for("repkv_forward", (B, T, NH, NH_KV, HD), qkv.dtype, device)
    _launcher.launch(launcher, device, out, qkv)
    return out


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
    head replicated NH / NH_KV times. On CUDA (fp32, bf16, fp16) the tuned repkv_forward kernel
    (a bit-exact copy); its backward is the tuned repkv backward."""
    NH, NH_KV = _counts(NH=NH, NH_KV=NH_KV)
    return torch.ops.repkv_tune.repkv(qkv, NH, NH_KV)


def served(
    shape: tuple[int, int, int, int, int],
    dtype: torch.dtype,
    device: int = 0,
    op: str = _launcher.DEFAULT_OP,
) -> tuple[str, str, tuple[tuple[str, float], ...]]:
    """(configuration key, how it was chosen: "exact" | "partial" | "nearest" | "raced" |
    "refined" (raced, then beaten by a neighbour of the race's winner) | "generic"; both "copy"
    where the op copies at NH == NH_KV instead of launching a kernel; the race's (configuration,
    median ms) if one was run) of `op`'s kernel (default: the repkv backward; any of
    variants.OPS) for (B, T, NH, NH_KV, HD) on this CUDA device, compiling (and, where
    the shape is untuned, racing) it if needed. A shape, dtype or op that no kernel serves is a
    ValueError; a machine where PyTorch sees no CUDA device, a RuntimeError."""
    if len(shape) != 5:
        raise ValueError(f"shape must be (B, T, NH, NH_KV, HD); got {len(shape)} values")
    name = _launcher.dtype_name(dtype)
    checked, served_op = variants.Shape(*shape), variants.get_op(op)  # InvalidShape, UnknownOp
    refused = served_op.rejection(checked)
    if refused is not None:
        raise ValueError(f"{op} cannot run {checked}: {refused[1]}")
    if checked.NH == checked.NH_KV and served_op.copies_without_replicas:
        return COPY, COPY, ()  # the op copies (NH == NH_KV): no kernel is served
    if not torch.cuda.is_available():
        raise RuntimeError(
            f"served() compiles {op}'s kernel for a CUDA device, and PyTorch sees none here "
            f"(torch {torch.__version__}, CUDA {torch.version.cuda or 'not built in'})"
        )
    launcher = _launcher.LAUNCHERS.get((tuple(shape), name, device), op)
    return launcher.config_key, launcher.served_from, launcher.race


__all__ = [
    "record_races",
    "reference_backward",
    "reference_forward",
    "repkv",
    "repkv_backward",
    "served",
]
