from __future__ import annotations

import math
from collections import Counter

import optuna
import pytest
import tuner_fakes as F

from results.schema import FAILURES, Status
from results.store import load_results
from tuner.bench import BenchRunner
from tuner.rows import ResultsSink
from tuner.runner import Measurement
from tuner.storage import make_storage
from tuner.study import StudyLoop, StudyPlan
from variants import BASELINE, DTYPES, Config

optuna.logging.set_verbosity(optuna.logging.WARNING)
BF16 = DTYPES["bf16"]


def plan(**kw) -> StudyPlan:
    base = dict(gpu="h200", shape=F.SMALL, dtype=BF16, study_name="s", sampler="tpe", seed=1, trials=15)
    base.update(kw)
    return StudyPlan(**base)


def test_baseline_first_then_distinct_configs_up_to_the_budget(tmp_path) -> None:
    runner = F.synthetic_runner()
    sink = ResultsSink(tmp_path, "h200", "run-a")
    outcome = StudyLoop(plan(), runner, None, run_id="run-a", sink=sink).run()
    keys = [c.key for _, _, c in runner.calls]
    assert keys[0] == BASELINE.key
    assert len(keys) == len(set(keys)) == 15
    assert [k for k, _ in outcome.measured] == keys
    frame, _ = load_results(tmp_path)
    assert sorted(frame["config_key"]) == sorted(keys)
    assert set(frame["run_id"]) == {"run-a"} and set(frame["study"]) == {"s"}


FAULTS = {
    Status.COMPILE_ERROR: Measurement.failed(Status.COMPILE_ERROR, "error: identifier undefined"),
    Status.LAUNCH_ERROR: Measurement.failed(Status.LAUNCH_ERROR, "too many resources requested for launch"),
    Status.WRONG_RESULT: Measurement.failed(Status.WRONG_RESULT, "max abs error 3.0 at (0,1,2)"),
    Status.TIMEOUT: Measurement.failed(Status.TIMEOUT, "kernel did not finish in 10 s; worker restarted"),
}


def faulty_bench(shape, dtype, config: Config) -> Measurement:
    """Every family but split misbehaves in its own way; split raises (a crash)."""
    if config == BASELINE:
        return F.synthetic_bench(shape, dtype, config)
    planted = {
        "gather": Status.COMPILE_ERROR,
        "vec": Status.LAUNCH_ERROR,
        "warp_per_head": Status.WRONG_RESULT,
        "naive": Status.TIMEOUT,
    }
    if config.family == "split":
        raise RuntimeError("worker died: illegal memory access")
    return FAULTS[planted[config.family]]


def test_every_fault_is_a_row_with_its_status_and_infinite_time_and_the_study_goes_on(tmp_path) -> None:
    runner = BenchRunner(faulty_bench, F.IDENTITY, F.copy_ms)
    sink = ResultsSink(tmp_path, "h200", "run-f")
    outcome = StudyLoop(plan(sampler="grid"), runner, None, run_id="run-f", sink=sink).run()
    frame, _ = load_results(tmp_path)
    assert len(frame) == outcome.space_size  # all measured although most failed
    statuses = Counter(frame["status"])
    assert set(statuses) == {Status.OK, *FAILURES}
    assert statuses[Status.OK] == 1
    failed = frame[frame["status"] != Status.OK]
    assert failed["time_ms"].map(math.isinf).all()
    assert failed["ratio_to_copy"].map(math.isinf).all()
    crash = failed[failed["status"] == Status.CRASH]["message"].iloc[0]
    assert "illegal memory access" in crash
    assert outcome.failures[Status.CRASH] == statuses[Status.CRASH]
    assert outcome.best_value == pytest.approx(
        F.synthetic_ms(F.SMALL, BF16, BASELINE) / F.copy_ms(F.SMALL, BF16)
    )


def test_grid_measures_every_valid_config_once_whatever_the_trial_budget(tmp_path) -> None:
    runner = F.synthetic_runner()
    outcome = StudyLoop(plan(sampler="grid", trials=3), runner, None).run()
    keys = [c.key for _, _, c in runner.calls]
    assert len(keys) == len(set(keys)) == outcome.space_size


def test_grid_lets_the_runner_compile_every_configuration_first() -> None:
    runner = F.RecordingRunner()
    outcome = StudyLoop(plan(sampler="grid"), runner, None).run()
    assert len(runner.prepared) == 1
    assert {c.key for _, _, c in runner.prepared[0]} == {c.key for _, _, c in runner.calls}
    assert len(runner.prepared[0]) == outcome.space_size


def test_a_finished_study_measures_nothing_more(tmp_path) -> None:
    storage = make_storage(f"sqlite:///{tmp_path / 'o.db'}")
    StudyLoop(plan(trials=6), F.synthetic_runner(), storage).run()
    again = F.synthetic_runner()
    outcome = StudyLoop(plan(trials=6), again, storage).run()
    assert again.calls == []
    assert len(outcome.rows) == 6


@pytest.mark.parametrize("sampler", ["random", "qmc"])
def test_other_samplers_run_the_same_loop(sampler: str) -> None:
    pytest.importorskip("scipy") if sampler == "qmc" else None
    runner = F.synthetic_runner()
    StudyLoop(plan(sampler=sampler, trials=8), runner, None).run()
    assert len({c.key for _, _, c in runner.calls}) == len(runner.calls) == 8
