"""The seam between the study and whatever answers its trials.

A `Runner` measures one configuration of one shape and dtype. The GPU runner does it on the
device in a worker process; the replay runner answers from recorded parquet; `BenchRunner`
wraps a benchmark function, which is how tests pass fakes. Every runner derives from `Runner`,
so the study and the CLI use its whole contract without asking what a runner can do.
"""

from __future__ import annotations

import math
import socket
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import TypeVar

from results.schema import Status
from tuner.interrupt import StopFlag
from variants import Config, DType, Family, Shape, families_for


@dataclass(frozen=True)
class GpuIdentity:
    name: str  # as the device reports it, e.g. "NVIDIA H200"
    compute_capability: str  # "9.0"
    sm_count: int
    driver_version: str = ""
    cuda_version: str = ""
    cupy_version: str = ""
    host: str = field(default_factory=socket.gethostname)
    pci_bus_id: str = ""  # "0000:3B:00.0": which of the host's GPUs (one measuring process each)
    # An empty kernel's launch, timed like every trial (L2 flushed first): the fixed cost in
    # each time, which a copy of a few MB carries too. None where nothing measured it.
    empty_launch_ms: float | None = None
    # The GPU-side wait (µs) after each L2 flush before a timed call (0: none); None where unknown.
    hold_us: float | None = None
    # What L2 held when each timed call started (results.schema.L2_STATES); None where unknown.
    l2: str | None = None
    # How the copy each row is held to was timed (results.schema.COPY_FASTEST); None: memcpy alone.
    copy_method: str | None = None

    def as_row(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class Measurement:
    """The outcome of one trial. Every status but OK has an infinite time. A status given as
    a string becomes its Status (an unknown one raises ValueError)."""

    status: Status
    message: str = ""
    time_ms: float = math.inf
    p20_ms: float = math.inf
    p80_ms: float = math.inf
    reps: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", Status(self.status))

    @property
    def ok(self) -> bool:
        return self.status == Status.OK

    @classmethod
    def failed(cls, status: Status, message: str) -> Measurement:
        return cls(status=status, message=message[:2000])


Work = tuple[Shape, DType, Config]  # one trial to measure
GroupKey = tuple[str, str]  # (shape key, dtype name)
R = TypeVar("R", bound="Runner")


class Runner(ABC):
    """Answers trials. A subclass calls `super().__init__()`, sets `identity` and implements
    `copy_time` and `measure`; `prepare` and `close` default to doing nothing.

    `missing` counts, per (shape key, dtype), the configurations asked for that this runner
    cannot answer: their measurements have status MISSING (a replay's recording lacks them).
    A runner that answers everything leaves it empty.

    `stop` is the run's stop request (Ctrl-C): a runner that waits (a replay's delay, the GPU
    worker's answer) looks at it while waiting and raises TrialInterrupted when it is set,
    so that a stop never waits for a long measurement; the pipeline hands it its own flag.
    `abort()` ends at once whatever the runner started (the GPU worker process): the second
    Ctrl-C calls it from a signal handler just before the process exits.
    """

    identity: GpuIdentity

    def __init__(self) -> None:
        self.missing: Counter[GroupKey] = Counter()
        self.stop = StopFlag()

    def runnable_families(self, shape: Shape, dtype: DType) -> dict[str, Family]:
        """The kernel families this runner can measure for (shape, dtype): those its GPU is
        new enough for."""
        return families_for(self.identity.compute_capability)

    @abstractmethod
    def copy_time(self, shape: Shape, dtype: DType) -> float:
        """The same-process device copy of the kernel's bytes, in ms."""

    @abstractmethod
    def measure(self, shape: Shape, dtype: DType, config: Config) -> Measurement:
        """One trial. A failure is a Measurement with its status, not an exception."""

    def prepare(self, work: Iterable[Work]) -> int:
        """Get ready for many trials at once (the GPU runner compiles their kernels in
        parallel). Returns how many were prepared."""
        return 0

    def close(self) -> None:
        """Release what the runner holds (the GPU runner's worker process)."""
        return None

    def abort(self) -> None:
        """Kill what the runner started, now (called from a signal handler: no waiting)."""
        return None

    def __enter__(self: R) -> R:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
