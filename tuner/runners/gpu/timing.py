"""CUDA-event timing: warm-up, then many repetitions with the L2 flushed before each,
reported as the median with p20 and p80."""

from __future__ import annotations

import copy
import functools
import time
from collections.abc import Callable

import cupy as cp
import numpy as np

from results.schema import L2_COLD, L2_FED, check_l2
from tuner.runners.timing_sources import COPY_BLOCK, COPY_KERNEL_SOURCE, HOLD_SOURCE, copy_geometry
from tuner.runners.timing_stats import Timing, Windows, hold_for


@functools.cache
def device_function(device: int, source: str, name: str) -> cp.RawKernel:
    """The `extern "C"` kernel `name` of `source`, compiled and loaded once per device (the
    harness's own kernels: the hold, the copy, the profiler's markers)."""
    with cp.cuda.Device(device):
        return cp.RawModule(code=source).get_function(name)


def hold_kernel(device: int) -> cp.RawKernel:
    """HOLD_SOURCE's kernel on the device; launch it with the wait in ns as a uint64."""
    return device_function(device, HOLD_SOURCE, "hold_ns")


def empty_launch() -> Callable[[], None]:
    """One launch of an empty kernel: the fixed cost every timed call carries."""
    kernel = cp.RawKernel('extern "C" __global__ void empty_kernel() {}', "empty_kernel")

    def launch() -> None:
        kernel((1,), (1,), ())

    return launch


class L2Flusher:
    """Reads a buffer twice the size of L2 so the next launch starts with a cold cache
    (a read leaves clean lines, so no write-back lands inside the timed kernel).

    With `hold_us` > 0 the GPU then waits that long, so the timed call is already queued when
    it starts: the time is the GPU's alone. Without it, a kernel shorter than the CPU's launch
    cost is timed from the flush's end, launch gap included (a few microseconds).

    With `l2="fed"`, a flusher `feeding(dout)` then writes all of dout, as the kernel before
    this one in a training step (attention's backward) leaves it: the timed call reads what of
    dout L2 still holds from there, dirty, as it would in that step."""

    def __init__(self, device: cp.cuda.Device, hold_us: float = 0.0, l2: str = L2_COLD):
        l2_bytes = int(device.attributes.get("L2CacheSize", 64 * 2**20))
        self.buffer = cp.ones(2 * l2_bytes // 4, dtype=cp.float32)
        self._sink = cp.empty((), dtype=cp.float32)
        self._device = device.id
        self.l2 = check_l2(l2)
        self._fed: cp.ndarray | None = None
        self._set_hold(hold_us)

    def _set_hold(self, hold_us: float) -> None:
        self.hold_us = float(hold_us)
        self._hold_ns = np.uint64(int(self.hold_us * 1000))
        self._hold = hold_kernel(self._device) if self._hold_ns else None

    def with_hold(self, hold_us: float) -> L2Flusher:
        """The same flush (the same buffer) followed by another hold."""
        held = copy.copy(self)
        held._set_hold(hold_us)
        return held

    def feeding(self, target: cp.ndarray) -> L2Flusher:
        """This flusher, writing all of `target` after its hold where its L2 state is fed (a
        cold one is returned as it is)."""
        if self.l2 != L2_FED:
            return self
        fed = copy.copy(self)
        fed._fed = target
        return fed

    def __call__(self) -> None:
        cp.max(self.buffer, out=self._sink)
        if self._hold is not None:
            self._hold((1,), (1,), (self._hold_ns,))
        if self._fed is not None:
            self._fed.fill(1)  # a kernel's writes, not a memset: dirty lines in L2, as a producer leaves them


def time_windows(
    launch: Callable[[], None], flush: Callable[[], None], reps: int = 50, warmup: int = 3
) -> Windows:
    """`reps` calls, each after `flush`, each between two CUDA events on CuPy's current stream."""
    stream = cp.cuda.get_current_stream()
    for _ in range(warmup):
        launch()
    stream.synchronize()
    starts = [cp.cuda.Event() for _ in range(reps)]
    ends = [cp.cuda.Event() for _ in range(reps)]
    began = time.perf_counter()
    for start, end in zip(starts, ends, strict=True):
        flush()
        start.record(stream)
        launch()
        end.record(stream)
    enqueue_s = time.perf_counter() - began
    ends[-1].synchronize()
    ms = np.array([cp.cuda.get_elapsed_time(s, e) for s, e in zip(starts, ends, strict=True)])
    gpu_ms = cp.cuda.get_elapsed_time(starts[0], ends[-1])
    return Windows(ms, 1e6 * enqueue_s / reps, 1e3 * gpu_ms / reps)


def time_launches(
    launch: Callable[[], None], flush: Callable[[], None], reps: int = 50, warmup: int = 3
) -> Timing:
    """Median and p20/p80 of `reps` event windows (see time_windows). Under a holding flush,
    calls that cost the CPU too long to issue for the hold to keep it far enough ahead (a
    torch.compile'd function: guards, wrapper) are timed again under a hold long enough
    (timing_stats.HEADROOM); the Timing says which hold its windows had."""
    windows = time_windows(launch, flush, reps, warmup)
    hold_us = getattr(flush, "hold_us", 0.0)
    if not hold_us or windows.far_enough_ahead():
        return windows.timing(hold_us)
    longer = flush.with_hold(hold_for(windows, hold_us))
    return time_windows(launch, longer, reps, warmup).timing(longer.hold_us)


def copy_kernel(
    dst_ptr: int, src_ptr: int, nbytes: int, stream: cp.cuda.Stream | None = None
) -> Callable[[], None]:
    """A launch of the 16-byte copy kernel: nbytes from src_ptr to dst_ptr (both 16-byte aligned,
    as CuPy's and PyTorch's allocations are), the last nbytes % 16 one byte a thread."""
    if dst_ptr % 16 or src_ptr % 16:
        raise ValueError("the copy kernel needs 16-byte aligned buffers")
    kernel = device_function(cp.cuda.Device().id, COPY_KERNEL_SOURCE, "copy_words")
    words, tail, grid = copy_geometry(nbytes)
    end = 16 * words
    args = (
        np.uint64(dst_ptr),
        np.uint64(src_ptr),
        np.uint64(words),
        np.uint64(dst_ptr + end),
        np.uint64(src_ptr + end),
        np.uint32(tail),
    )

    def launch() -> None:
        kernel((grid,), (COPY_BLOCK,), args, stream=stream)

    return launch


def device_copy(nbytes: int, method: str = "memcpy") -> Callable[[], None]:
    """A launch of a device-to-device copy of nbytes between two new buffers, by
    cudaMemcpyAsync (`memcpy`) or the 16-byte copy kernel (`kernel`)."""
    return copy_launchers(nbytes)[method]


def copy_buffers(nbytes: int) -> tuple[cp.ndarray, cp.ndarray]:
    """A source of nbytes (ones) and a destination as large (at least a byte each)."""
    src = cp.empty(max(nbytes, 1), dtype=cp.uint8)
    src.fill(1)
    return src, cp.empty(max(nbytes, 1), dtype=cp.uint8)


def copy_launchers(
    nbytes: int, buffers: tuple[cp.ndarray, cp.ndarray] | None = None
) -> dict[str, Callable[[], None]]:
    """Both copies of nbytes, over the same two buffers (new ones by default; each launch
    keeps them alive)."""
    src, dst = buffers if buffers is not None else copy_buffers(nbytes)
    stream = cp.cuda.get_current_stream()
    kernel = copy_kernel(dst.data.ptr, src.data.ptr, nbytes, stream)

    def memcpy() -> None:
        cp.cuda.runtime.memcpyAsync(
            dst.data.ptr, src.data.ptr, nbytes, cp.cuda.runtime.memcpyDeviceToDevice, stream.ptr
        )

    def by_kernel(buffers: tuple = (src, dst)) -> None:  # holds the buffers the kernel copies
        kernel()

    return {"memcpy": memcpy, "kernel": by_kernel}


def fastest_copy(nbytes: int, flush: Callable[[], None], reps: int = 50) -> tuple[str, Timing]:
    """Both copies of nbytes timed alike over the same buffers: the faster's method and timing.
    A feeding flusher (`L2Flusher.feeding`) writes the copy's source before each call, as it
    writes the kernel's dout."""
    buffers = copy_buffers(nbytes)
    launchers = copy_launchers(nbytes, buffers)
    if isinstance(flush, L2Flusher):
        flush = flush.feeding(buffers[0])
    timed = {method: time_launches(launch, flush, reps=reps) for method, launch in launchers.items()}
    method = min(timed, key=lambda m: timed[m].median_ms)
    return method, timed[method]


def time_device_copy(nbytes: int, flush: Callable[[], None], reps: int = 50) -> Timing:
    """A device-to-device copy of nbytes, the faster of cudaMemcpyAsync and the copy kernel: the
    kernel's practical ceiling when nbytes is half the bytes the kernel moves (it then reads and
    writes as many)."""
    return fastest_copy(nbytes, flush, reps)[1]
