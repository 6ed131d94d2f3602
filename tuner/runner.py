"""The seam between the study and whatever answers its trials.

A `Runner` measures one configuration of one shape and dtype. The GPU runner does it on the
device in a worker process; the replay runner answers from recorded parquet; tests pass fakes.
"""

from __future__ import annotations

import math
import socket
from dataclasses import asdict, dataclass, field
from typing import Protocol

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
    """The outcome of one trial. Every status but "ok" has an infinite time."""

    status: str
    message: str = ""
    time_ms: float = math.inf
    p20_ms: float = math.inf
    p80_ms: float = math.inf
    reps: int = 0

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @classmethod
    def failed(cls, status: str, message: str) -> Measurement:
        return cls(status=status, message=message[:2000])


class Runner(Protocol):
    """Answers trials. `copy_time` is the same-process device copy of the kernel's bytes."""

    identity: GpuIdentity

    def copy_time(self, shape: Shape, dtype: DType) -> float: ...

    def measure(self, shape: Shape, dtype: DType, config: Config) -> Measurement: ...

    def close(self) -> None: ...
