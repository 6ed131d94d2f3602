"""scripts/bench_untuned.py's --refine step without a GPU: the raced configuration's
one-parameter neighbours are timed beside it and the tuned winner, and the pick the op's race
would make (the raced one unless a neighbour beats it by the race's margin) is reported over the
tuned winner of the same rounds."""

from __future__ import annotations

import json

from load_script import load_script

import variants
from tuner.runners.runner import Measurement
from variants import Config, Shape, get_dtype

bench_untuned = load_script("scripts/bench_untuned.py")

SHAPE, BF16 = Shape(8, 1024, 32, 8, 128), get_dtype("bf16")
RACED = Config.of("vec", block=256, load="ldg", store="plain", vec_bytes=16)
TUNED = Config.of("split", block=64, items=2, load="plain", store="plain", vec_bytes=16)


class FakeRunner:
    """Times from a table (1.0 ms where it names none); every call recorded."""

    def __init__(self, ms: dict[Config, float]) -> None:
        self.ms, self.prepared, self.measured = ms, [], []

    def prepare(self, work: list) -> int:
        self.prepared += work
        return len(work)

    def measure(self, shape: Shape, dtype: object, config: Config) -> Measurement:
        self.measured.append(config)
        if config.values.get("load") == "ldcs":
            return Measurement.failed("compile_error", "not this one")
        return Measurement("ok", time_ms=self.ms.get(config, 1.0))


def test_refine_reports_the_fastest_neighbour_over_the_tuned_winner() -> None:
    faster = Config.of("vec", block=128, load="ldg", store="plain", vec_bytes=16)
    runner = FakeRunner({RACED: 1.10, TUNED: 0.90, faster: 0.99})
    op = variants.get_op("repkv_backward")
    row = bench_untuned.refine_after_race(runner, op, SHAPE, BF16, RACED, TUNED)
    neighbours = op.family("vec").neighbours(SHAPE, BF16, RACED)
    timed = [RACED, *neighbours, TUNED]
    assert [c for _, _, c in runner.prepared] == timed
    assert runner.measured == timed * 3  # three interleaved rounds
    assert row["refined"] == faster.key
    assert abs(row["refined_vs_tuned"] - 0.99 / 0.90) < 1e-12
    steps = json.loads(row["refine_steps"])
    assert steps[TUNED.key] == 0.90 and list(steps) == [c.key for c in timed]
    # a neighbour that failed every round has no time, and is never the refined pick
    assert steps[Config.of("vec", block=256, load="ldcs", store="plain", vec_bytes=16).key] is None


def test_refine_keeps_the_raced_one_unless_a_neighbour_beats_it_by_the_races_margin() -> None:
    op = variants.get_op("repkv_backward")
    close = Config.of("vec", block=128, load="ldg", store="plain", vec_bytes=16)
    row = bench_untuned.refine_after_race(
        FakeRunner({RACED: 1.0, close: 0.995}), op, SHAPE, BF16, RACED, TUNED
    )
    assert row["refined"] == RACED.key and row["refined_vs_tuned"] == 1.0
    row = bench_untuned.refine_after_race(
        FakeRunner({RACED: 1.0, close: 0.98}), op, SHAPE, BF16, RACED, TUNED
    )
    assert row["refined"] == close.key
