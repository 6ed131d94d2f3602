"""CUDA-event timing: warm-up, then many repetitions with the L2 flushed before each,
reported as the median with p20 and p80."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import cupy as cp
import numpy as np


@dataclass(frozen=True)
class Timing:
    median_ms: float
    p20_ms: float
    p80_ms: float
    reps: int


class L2Flusher:
    """Reads a buffer twice the size of L2 so the next launch starts with a cold cache
    (a read leaves clean lines, so no write-back lands inside the timed kernel)."""

    def __init__(self, device: cp.cuda.Device):
        l2_bytes = int(device.attributes.get("L2CacheSize", 64 * 2**20))
        self.buffer = cp.ones(2 * l2_bytes // 4, dtype=cp.float32)
        self._sink = cp.empty((), dtype=cp.float32)

    def __call__(self) -> None:
        cp.max(self.buffer, out=self._sink)


def time_launches(
    launch: Callable[[], None], flush: Callable[[], None], reps: int = 50, warmup: int = 3
) -> Timing:
    stream = cp.cuda.get_current_stream()
    for _ in range(warmup):
        launch()
    stream.synchronize()
    starts = [cp.cuda.Event() for _ in range(reps)]
    ends = [cp.cuda.Event() for _ in range(reps)]
    for start, end in zip(starts, ends, strict=True):
        flush()
        start.record(stream)
        launch()
        end.record(stream)
    ends[-1].synchronize()
    times = np.array([cp.cuda.get_elapsed_time(s, e) for s, e in zip(starts, ends, strict=True)])
    p20, median, p80 = np.percentile(times, [20, 50, 80])
    return Timing(float(median), float(p20), float(p80), reps)


def time_device_copy(nbytes: int, flush: Callable[[], None], reps: int = 50) -> Timing:
    """A device-to-device cudaMemcpyAsync of nbytes: the kernel's practical ceiling when
    nbytes is half the bytes the kernel moves (it then reads and writes as many)."""
    src = cp.empty(nbytes, dtype=cp.uint8)
    src.fill(1)
    dst = cp.empty(nbytes, dtype=cp.uint8)
    stream = cp.cuda.get_current_stream()

    def copy() -> None:
        cp.cuda.runtime.memcpyAsync(
            dst.data.ptr, src.data.ptr, nbytes, cp.cuda.runtime.memcpyDeviceToDevice, stream.ptr
        )

    return time_launches(copy, flush, reps=reps)
