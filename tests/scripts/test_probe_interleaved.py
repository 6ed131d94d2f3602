"""The probes' interleaved timing, with fake sessions: rounds alternate copy and kernels, the
fastest round of each is kept, and a kernel that always fails is NaN."""

from __future__ import annotations

import math
from types import SimpleNamespace

from load_script import load_script

from variants import Config, Shape, get_dtype


class FakeSession:
    def __init__(self, times: list[float | None], copies: list[float]) -> None:
        self.times, self.copies, self.calls = list(times), list(copies), []

    def copy_ms(self, shape, dtype, rounds):
        self.calls.append("copy")
        return self.copies.pop(0)

    def measure(self, shape, dtype, config):
        self.calls.append(config.family)
        t = self.times.pop(0)
        return SimpleNamespace(ok=t is not None, time_ms=t, status="crash", message="boom")


def test_rounds_interleave_and_keep_the_fastest_of_each() -> None:
    fastest = load_script("scripts/probes/interleaved.py").fastest_interleaved
    a, b = (
        Config.of("vec", block=256, vec_bytes=16, load="plain", store="plain"),
        Config.of("gather", block=128),
    )
    one = FakeSession([1.0, 3.0, 0.9, 2.5, 1.1, 2.8], [0.5, 0.4, 0.6])
    best, copy = fastest(Shape(1, 8, 4, 1, 64), get_dtype("bf16"), {"a": (one, a), "b": (one, b)}, rounds=3)
    assert best == {"a": 0.9, "b": 2.5} and copy == 0.4
    assert one.calls == ["copy", "vec", "gather"] * 3
    failing = FakeSession([None, None], [0.5, 0.5])
    best, _ = fastest(Shape(1, 8, 4, 1, 64), get_dtype("bf16"), {"x": (failing, a)}, rounds=2)
    assert math.isnan(best["x"])
