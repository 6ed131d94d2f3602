"""The probes' timing: a few kernels and a device copy of the same bytes, interleaved over rounds
in one GPU process, the fastest round of each kept."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from variants import Config, DType, Shape


def fastest_interleaved(
    shape: Shape, dtype: DType, timed: Mapping[str, tuple[Any, Config]], rounds: int
) -> tuple[dict[str, float], float]:
    """Each named (DeviceSession, configuration) of `timed` and the first session's copy of the
    same bytes, timed in turn each round: the fastest time of each name (NaN where every round
    failed; the failure is printed) and of the copy."""
    times: dict[str, list[float]] = {name: [] for name in timed}
    copies = []
    copier = next(iter(timed.values()))[0]
    for _ in range(rounds):
        copies.append(copier.copy_ms(shape, dtype, rounds=1))
        for name, (session, config) in timed.items():
            m = session.measure(shape, dtype, config)
            if not m.ok:
                print(f"  {name} {config.key}: {m.status} {m.message[:300]}", flush=True)
                continue
            times[name].append(m.time_ms)
    return {name: min(t) if t else math.nan for name, t in times.items()}, min(copies)
