"""What the op's race (`repkv_tune.race`) times with, for any op of `variants.OPS`: the op's
inputs (fresh random values, its fixed ones as it defines them), the L2 flushed before every
call and the GPU held RACE_HOLD_US after it, as the tuner times; the candidates' output
validated against the op's float64 reference, and a device copy of the op's bytes to hold them to."""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from results.schema import DEFAULT_HOLD_US, L2_FED

if TYPE_CHECKING:
    from repkv_tune.launcher import Launcher
    from variants import DType, Op, Shape

# The L2 state the op's configurations are chosen (and its races timed) in: fed by default, as
# in a training step, where the kernel before has just written the op's first input (dout);
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
    """What a race times `op`'s candidates with, on one device and stream: the op's inputs
    (`op.inputs`: standard-normal values, the fixed ones, freqs_cis, as the op defines them), its
    output, a buffer twice the L2 written before every timed call so each starts with a cold
    cache, and the hold kernel launched after it."""

    def __init__(self, op: Op, shape: Shape, dtype: DType, device: int, stream: torch.cuda.Stream) -> None:
        import cupy as cp
        import numpy as np

        from tuner.runners.gpu.peers import as_storage, cupy_stream
        from tuner.runners.gpu.timing import hold_kernel
        from tuner.runners.gpu.torch_peers import TORCH_DTYPES
        from variants.reference import fixed_input

        torch_dtype = TORCH_DTYPES[dtype.name]
        self.op, self.shape, self.dtype, self.device, self.stream = op, shape, dtype, device, stream
        self._cupy_stream = cupy_stream(stream)
        self.inputs = []
        for operand in op.inputs:
            tensor = torch.empty(operand.numel(shape), device=device, dtype=torch_dtype)
            with cp.cuda.Device(device), self._cupy_stream:  # in order with the race's stream
                fixed = fixed_input(op, operand.name, shape, dtype, cp)
                if fixed is None:
                    tensor.normal_()
                else:
                    as_storage(tensor, dtype)[...] = fixed
            self.inputs.append(tensor)
        self.out = torch.empty(op.output.numel(shape), device=device, dtype=torch_dtype)
        l2 = torch.cuda.get_device_properties(device).L2_cache_size
        self.flush = torch.empty(2 * max(l2, 1 << 20), dtype=torch.uint8, device=device)
        self._hold = hold_kernel(device)
        self._hold_ns = np.uint64(int(RACE_HOLD_US * 1000))

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
            if L2 == L2_FED:  # the first input (dout) written after the flush, as the kernel before leaves it
                self.inputs[0].fill_(1.0)
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            launch()
            stop.record()
            stop.synchronize()
            if rep:
                samples.append(start.elapsed_time(stop))
        return samples

    def launch(self, launcher: Launcher) -> None:
        launcher(self.out.data_ptr(), *(t.data_ptr() for t in self.inputs), stream=self.stream.cuda_stream)

    def time(self, launcher: Launcher) -> list[float]:
        return self.samples(lambda: self.launch(launcher))

    def check(self, launcher: Launcher) -> None:
        """One launch into a NaN-poisoned output, every element compared with the op's float64
        reference (`variants.reference.validate_output`, the tuner's validator); raises
        WrongResult when any differs."""
        import cupy as cp

        from tuner.runners.gpu.peers import as_storage
        from tuner.runners.race_record import WrongResult
        from variants.reference import validate_output

        self.out.fill_(float("nan"))
        self.launch(launcher)
        self.stream.synchronize()
        with cp.cuda.Device(self.device):
            validation = validate_output(
                as_storage(self.out, self.dtype),
                tuple(as_storage(t, self.dtype) for t in self.inputs),
                self.shape,
                self.dtype,
                cp,
                chunk_elements=VALIDATION_CHUNK,
                op=self.op,
            )
            cp.cuda.get_current_stream().synchronize()
            cp.get_default_memory_pool().free_all_blocks()
        if not validation.ok:
            raise WrongResult(validation.summary())

    def copy_ms(self) -> float:
        """A device-to-device copy of half the op's bytes (as many read as written), timed
        as the candidates are: the fastest of COPY_ROUNDS medians of each of PyTorch's copy
        (cudaMemcpyAsync) and the tuner's 16-byte copy kernel (the tuner's rule)."""
        import cupy as cp

        from tuner.runners.gpu.timing import copy_kernel

        nbytes = self.op.bytes_moved(self.shape, self.dtype) // 2
        source = torch.ones(nbytes, dtype=torch.uint8, device=self.device)
        target = torch.empty_like(source)
        with cp.cuda.Device(self.device):
            launch = copy_kernel(target.data_ptr(), source.data_ptr(), nbytes, self._cupy_stream)

        def by_kernel() -> None:
            with cp.cuda.Device(self.device):
                launch()

        copies = (lambda: target.copy_(source), by_kernel)
        return min(statistics.median(self.samples(copy)) for copy in copies for _ in range(COPY_ROUNDS))
