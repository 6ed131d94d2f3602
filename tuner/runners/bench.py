"""A Runner around a benchmark function, as Triton's autotuner receives `do_bench`.

    runner = BenchRunner(bench, identity, copy=lambda shape, dtype: 1.0)

`bench(shape, dtype, config) -> Measurement` may return a failed Measurement or raise: an
exception becomes a "crash" Measurement, and the study goes on. Tests pass fakes here
instead of patching the GPU runner.
"""

from __future__ import annotations

from collections.abc import Callable

from results.schema import Status
from tuner.interrupt import TrialInterrupted
from tuner.runners.runner import GpuIdentity, Measurement, Runner
from variants import Config, DType, Shape

Bench = Callable[[Shape, DType, Config], Measurement]
CopyBench = Callable[[Shape, DType], float]


def guarded(bench: Bench, shape: Shape, dtype: DType, config: Config) -> Measurement:
    """bench's answer, or a "crash" Measurement when it raises (never KeyboardInterrupt, nor
    TrialInterrupted: a measurement cut short by a stop request is no result)."""
    try:
        return bench(shape, dtype, config)
    except TrialInterrupted:
        raise
    except Exception as exc:
        return Measurement.failed(Status.CRASH, f"{type(exc).__name__}: {exc}")


class BenchRunner(Runner):
    def __init__(self, bench: Bench, identity: GpuIdentity, copy: CopyBench) -> None:
        super().__init__()
        self.bench = bench
        self.identity = identity
        self.copy = copy
        self.calls: list[tuple[Shape, DType, Config]] = []

    def copy_time(self, shape: Shape, dtype: DType) -> float:
        return self.copy(shape, dtype)

    def measure(self, shape: Shape, dtype: DType, config: Config) -> Measurement:
        if self.stop:
            raise TrialInterrupted
        self.calls.append((shape, dtype, config))
        return guarded(self.bench, shape, dtype, config)
