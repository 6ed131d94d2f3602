"""The seam between the study and whatever answers its trials.

A `Runner` measures one configuration of one shape and dtype. The GPU runner does it on the
device in a worker process; the replay runner answers from recorded parquet; tests pass fakes.
"""

from __future__ import annotations

import math
import socket
from dataclasses import asdict, dataclass, field
from typing import Protocol

from results.schema import Status
from variants import Config, DType, Shape


@dataclass(frozen=True)
class GpuIdentity:
    name: str  # as the device reports it, e.g. "NVIDIA H200"
    compute_capability: str  # "9.0"
    sm_count: int
    driver_version: str = ""
    cuda_version: str = ""
    cupy_version: str = ""
    host: str = field(default_factory=socket.gethostname)

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


class Runner(Protocol):
    """Answers trials. `copy_time` is the same-process device copy of the kernel's bytes."""

    identity: GpuIdentity

    def copy_time(self, shape: Shape, dtype: DType) -> float: ...

    def measure(self, shape: Shape, dtype: DType, config: Config) -> Measurement: ...

    def close(self) -> None: ...
