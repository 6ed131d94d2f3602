"""What the op's race (`repkv_tune.race`) times with: fresh random dout, the L2 flushed before
every call and the GPU held RACE_HOLD_US after it, as the tuner times; the candidates' output
validated against the float64 reference, and a device copy of the same bytes to hold them to."""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from results.schema import DEFAULT_HOLD_US, L2_FED

if TYPE_CHECKING:
    from repkv_tune.launcher import Launcher
    from variants import DType, Shape

# The L2 state the op's configurations are chosen (and its races timed) in: fed by default, as
# in a training step, where the kernel before (attention's backward) has just written dout;
# REPKV_L2=cold for a call that starts from a cold L2 (results.schema.L2_STATES).
L2 = os.environ.get("REPKV_L2", L2_FED)
RACE_REPS = 7  # timed calls of a candidate per round, after one untimed call
# The GPU-side wait after each flush (tuner.runners.gpu.timing.HOLD_SOURCE): the timed launch is queued
# before the GPU reaches it, so a race times what the tuner times and its recorded rows rank
# with the tuner's (RACE_REPS + 1 holds: about 1.2 ms per candidate).
RACE_HOLD_US = DEFAULT_HOLD_US
COPY_ROUNDS = 3  # the device copy a recorded race is held to: the fastest of this many medians
VALIDATION_CHUNK = 2**24  # elements validated at a time: float64 work of ~128 MiB beside training


class RaceBench:
    """What a race times with, on one device and stream: fresh random dout, a dinp, a buffer
    twice the L2 written before every timed call so each starts with a cold cache, and the
    hold kernel launched after it."""

    def __init__(self, shape: Shape, dtype: DType, device: int, stream: torch.cuda.Stream) -> None:
        torch_dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype.name]
        self.shape, self.dtype, self.device, self.stream = shape, dtype, device, stream
        dout_shape = (shape.B, shape.T, 3, shape.NH, shape.HD)
        dinp_shape = (shape.B, shape.T, shape.heads_in, shape.HD)
        self.dout = torch.randn(dout_shape, device=device, dtype=torch_dtype)
        self.dinp = torch.empty(dinp_shape, device=device, dtype=torch_dtype)
        l2 = torch.cuda.get_device_properties(device).L2_cache_size
        self.flush = torch.empty(2 * max(l2, 1 << 20), dtype=torch.uint8, device=device)
        import numpy as np

        from tuner.runners.gpu.peers import cupy_stream
        from tuner.runners.gpu.timing import hold_kernel

        self._hold = hold_kernel(device)
        self._hold_ns = np.uint64(int(RACE_HOLD_US * 1000))
        self._cupy_stream = cupy_stream(stream)

    def hold(self) -> None:
        """RACE_HOLD_US of waiting on the GPU, on the race's stream."""
        import cupy as cp

        with cp.cuda.Device(self.device):
            self._hold((1,), (1,), (self._hold_ns,), stream=self._cupy_stream)

    def samples(self, launch: Callable[[], None]) -> list[float]:
        """RACE_REPS CUDA-event times (ms) of `launch` on the current stream, L2 flushed and
        the GPU held before each, after one untimed call."""
        samples = []
        for rep in range(RACE_REPS + 1):
            self.flush.fill_(rep)
            self.hold()
            if L2 == L2_FED:  # dout written after the flush, as the kernel before leaves it
                self.dout.fill_(1.0)
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            launch()
            stop.record()
            stop.synchronize()
            if rep:
                samples.append(start.elapsed_time(stop))
        return samples

    def launch(self, launcher: Launcher) -> None:
        launcher(self.dinp.data_ptr(), self.dout.data_ptr(), stream=self.stream.cuda_stream)

    def time(self, launcher: Launcher) -> list[float]:
        return self.samples(lambda: self.launch(launcher))

    def check(self, launcher: Launcher) -> None:
        """One launch into a NaN-poisoned dinp, every element compared with the float64
        reference (`variants.reference.validate_output`, the tuner's validator); raises
        WrongResult when any differs."""
        import cupy as cp

        from tuner.runners.race_record import WrongResult
        from variants.reference import validate_output

        self.dinp.fill_(float("nan"))
        self.launch(launcher)
        self.stream.synchronize()
        with cp.cuda.Device(self.device):
            validation = validate_output(
                _storage(self.dinp, cp),
                _storage(self.dout, cp),
                self.shape,
                self.dtype,
                cp,
                chunk_elements=VALIDATION_CHUNK,
            )
            cp.cuda.get_current_stream().synchronize()
            cp.get_default_memory_pool().free_all_blocks()
        if not validation.ok:
            raise WrongResult(validation.summary())

    def copy_ms(self) -> float:
        """A device-to-device copy of half the shape's bytes (as many read as written), timed
        as the candidates are: the fastest of COPY_ROUNDS medians of each of PyTorch's copy
        (cudaMemcpyAsync) and the tuner's 16-byte copy kernel (the tuner's rule)."""
        import cupy as cp

        from tuner.runners.gpu.timing import copy_kernel

        nbytes = self.shape.bytes_moved(self.dtype) // 2
        source = torch.ones(nbytes, dtype=torch.uint8, device=self.device)
        target = torch.empty_like(source)
        with cp.cuda.Device(self.device):
            launch = copy_kernel(target.data_ptr(), source.data_ptr(), nbytes, self._cupy_stream)

        def by_kernel() -> None:
            with cp.cuda.Device(self.device):
                launch()

        copies = (lambda: target.copy_(source), by_kernel)
        return min(statistics.median(self.samples(copy)) for copy in copies for _ in range(COPY_ROUNDS))


def _storage(tensor: torch.Tensor, cp):
    """A CuPy view of a tensor's storage as the validator reads it (bf16 as uint16 bits)."""
    if tensor.dtype == torch.bfloat16:
        return cp.from_dlpack(tensor.view(torch.int16)).view(cp.uint16)
    return cp.from_dlpack(tensor)
