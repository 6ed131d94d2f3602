"""What the peers benchmark uses of the device (`Device`: on a GPU `gpu_device`, in the tests
CPU fakes), and which failures end the run (`recoverable`: those after which the CUDA context
is unusable)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from tuner.peers.plan import Plan
from variants import DType


@dataclass
class Device:
    """What the bench uses of the device. On a GPU: `gpu_device`; tests pass CPU fakes."""

    session: Any  # tuner.runners.gpu.session.DeviceSession: buffers, release, run_checked, measure, flush
    xp: Any  # cupy (the array module of the session's buffers)
    time_calls: Callable[..., Any]  # tuner.runners.gpu.timing.time_launches(launch, flush, reps=) -> Timing
    # tuner.runners.gpu.timing.fastest_copy(nbytes, flush, reps=) -> (method, Timing): cudaMemcpyAsync
    # or the 16-byte copy kernel, whichever ran faster
    time_copy: Callable[..., Any]
    empty_launch: Callable[[], None]  # one launch of an empty kernel
    to_torch: Callable[[Any, DType], Any]  # a session buffer as a torch tensor (shared memory)
    to_storage: Callable[[Any, DType], Any]  # a torch tensor as an array of dtype's storage
    torch_device: str  # where torch peers allocate ("cuda")
    name: str = ""
    label: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    # the device-time pass: tuner.runners.gpu.timing.device_copy(nbytes, method) -> a copy's launch, and
    # tuner.runners.gpu.kernel_profile.trace_calls(sides, flush, calls) -> trace events (None: no pass)
    copy_launch: Callable[[int, str], Callable[[], None]] | None = None
    trace_calls: Callable[..., list[dict[str, Any]]] | None = None


# PyTorch's messages after which the CUDA context is unusable (the session's own, for CuPy's
# errors, are tuner.runners.gpu.session.STICKY_ERRORS).
TORCH_STICKY = (
    "illegal memory access",
    "misaligned address",
    "unspecified launch failure",
    "device-side assert",
    "illegal instruction",
)


def is_sticky(message: str) -> bool:
    try:
        from tuner.runners.gpu.session import STICKY_ERRORS
    except ImportError:  # no cupy: nothing ran on a GPU
        STICKY_ERRORS = ()
    return any(marker in message for marker in (*STICKY_ERRORS, *TORCH_STICKY))


def recoverable(exc: Exception) -> str:
    """A failure as a row's message; raised again instead where the CUDA context is lost
    (`is_sticky`), which ends the run."""
    message = f"{type(exc).__name__}: {exc}"
    if is_sticky(message):
        raise exc
    return message


def _version(module: str) -> str:
    try:
        return __import__(module).__version__
    except Exception:
        return ""


def gpu_device(args: argparse.Namespace, plan: Plan) -> Device:
    """The session on GPU 0, its flush followed by the hold, torch on the same stream."""
    import cupy as cp
    import torch

    from tuner.run.gpus import default_label
    from tuner.runners.gpu.kernel_profile import trace_calls
    from tuner.runners.gpu.peers import as_storage, as_torch, share_stream_with_torch
    from tuner.runners.gpu.session import DeviceSession
    from tuner.runners.gpu.timing import device_copy, empty_launch, fastest_copy, time_launches

    # Every timed call, the session's own (its kernels) included, goes through its flush and hold.
    session = DeviceSession(reps=plan.reps, hold_us=plan.hold_us, l2=plan.l2)
    share_stream_with_torch(session.device.id)
    identity = session.identity
    label = args.gpu or default_label(identity.name)
    meta = {
        "gpu": identity.name,
        "gpu_label": label,
        "run_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "torch_version": torch.__version__,
        "triton_version": _version("triton"),
        "cupy_version": cp.__version__,
        "cuda_version": identity.cuda_version,
        "driver_version": identity.driver_version,
        "hold_us": plan.hold_us,
        "l2": plan.l2,
    }
    return Device(
        session=session,
        xp=cp,
        time_calls=time_launches,
        time_copy=fastest_copy,
        empty_launch=empty_launch(),
        to_torch=as_torch,
        to_storage=as_storage,
        torch_device="cuda",
        name=identity.name,
        label=label,
        meta=meta,
        copy_launch=device_copy if plan.device_time else None,
        trace_calls=trace_calls if plan.device_time else None,
    )
