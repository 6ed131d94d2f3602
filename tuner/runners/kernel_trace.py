"""Device time from a profiler trace: how long the GPU spent in each call's own kernels (and
copies), launch latency excluded.

An event-timed call (CUDA events around one launch) includes the GPU's fixed cost of starting
the work, about 3 us on an H200, and below ~30 MB that cost is a third or more of the window;
two launch paths of the same kernel can read 0.6 us apart. The profiler's (CUPTI's) records
give each kernel's start and end on the GPU instead. The profiling pass
(`tuner.runners.gpu.kernel_profile`) brackets every call with two marker kernels; `device_times` cuts
the trace at them. No GPU is needed here: the tests feed it made-up traces.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

BEGIN_MARKER = "repkv_trace_begin"
END_MARKER = "repkv_trace_end"
# Chrome-trace categories of work on the GPU: kernels, and the copy engine's copies and sets
# (the device copy peer is a memcpy, not a kernel).
DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


@dataclass(frozen=True)
class DeviceTime:
    median_us: float  # per call: the summed durations of its kernels and copies
    p20_us: float
    p80_us: float
    kernels: int  # kernels and copies per call (the median call's)
    calls: int


def device_events(trace: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The trace's GPU work (kernels, copies, sets), by start time."""
    return sorted((e for e in trace if e.get("cat") in DEVICE_CATEGORIES), key=lambda e: float(e["ts"]))


def split_calls(events: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """The work between each begin marker and the next end marker: one list per call."""
    calls: list[list[Mapping[str, Any]]] = []
    current: list[Mapping[str, Any]] | None = None
    for event in events:
        name = str(event.get("name", ""))
        if name.startswith(BEGIN_MARKER):
            if current is not None:
                raise ValueError("two begin markers without an end marker between them")
            current = []
        elif name.startswith(END_MARKER):
            if current is None:
                raise ValueError("an end marker without a begin marker")
            calls.append(current)
            current = None
        elif current is not None:
            current.append(event)
    if current is not None:
        raise ValueError("the trace ends inside a call (no end marker)")
    return calls


def device_times(
    trace: Iterable[Mapping[str, Any]], sides: Sequence[str], calls: int
) -> dict[str, DeviceTime]:
    """Per side (profiled in this order, `calls` calls each): the median, p20 and p80 over its
    calls of the GPU time its own work took. Raises ValueError when the trace does not hold
    len(sides) * calls bracketed calls, or a call ran no work at all."""
    per_call = split_calls(device_events(trace))
    if len(per_call) != len(sides) * calls:
        raise ValueError(f"the trace holds {len(per_call)} bracketed calls, expected {len(sides) * calls}")
    out = {}
    for i, side in enumerate(sides):
        chunk = per_call[i * calls : (i + 1) * calls]
        if any(not work for work in chunk):
            raise ValueError(f"{side}: a call ran no kernel or copy between its markers")
        busy = np.array([sum(float(e["dur"]) for e in work) for work in chunk])
        counts = sorted(len(work) for work in chunk)
        p20, median, p80 = np.percentile(busy, [20, 50, 80])
        out[side] = DeviceTime(float(median), float(p20), float(p80), counts[len(counts) // 2], calls)
    return out
