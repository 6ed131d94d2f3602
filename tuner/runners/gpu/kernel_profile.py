"""The profiling pass behind `tuner.runners.kernel_trace`: launch each side `calls` times, each call
after the L2 flush (and its hold) and bracketed by two empty marker kernels, under
torch.profiler (CUPTI), and return the trace's events. Needs CuPy and PyTorch on one stream."""

from __future__ import annotations

import json
import tempfile
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import cupy as cp

from tuner.runners.gpu.timing import device_function
from tuner.runners.kernel_trace import BEGIN_MARKER, END_MARKER

MARKERS_SOURCE = f"""
extern "C" __global__ void {BEGIN_MARKER}() {{}}
extern "C" __global__ void {END_MARKER}() {{}}
"""


def trace_calls(
    sides: Mapping[str, Callable[[], Any]], flush: Callable[[], None], calls: int
) -> list[dict[str, Any]]:
    """Every side once to warm up, then `calls` profiled calls of each in order; the chrome-trace
    events of the profile."""
    import torch

    device = cp.cuda.Device().id
    begin, end = (device_function(device, MARKERS_SOURCE, name) for name in (BEGIN_MARKER, END_MARKER))
    for launch in sides.values():
        launch()
    cp.cuda.get_current_stream().synchronize()
    torch.cuda.synchronize()
    with warnings.catch_warnings():
        # one profile, one cycle: its note on events cleared between cycles does not apply
        warnings.filterwarnings("ignore", message=".*Profiler clears events")
        prof = _profile(sides, flush, calls, begin, end)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        return json.loads(path.read_text())["traceEvents"]


def _profile(
    sides: Mapping[str, Callable[[], Any]], flush: Callable[[], None], calls: int, begin: Any, end: Any
) -> Any:
    """The profiled calls: flush (and hold), begin marker, the side's launch, end marker."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for launch in sides.values():
            for _ in range(calls):
                flush()
                begin((1,), (1,), ())
                launch()
                end((1,), (1,), ())
        cp.cuda.get_current_stream().synchronize()
        torch.cuda.synchronize()
    return prof
