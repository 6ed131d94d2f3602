"""The budget counts rows of the study that its trials never told (a worker killed between
writing its row and telling Optuna): the row stands, nobody measures it again, and the study
still ends at --trials distinct configurations."""

from __future__ import annotations

import optuna
import pytest
import tuner_fakes as F

from results.store import load_results, write_table
from tuner.run.rows import ResultsSink, StudyInfo, trial_row
from tuner.study.loop import StudyLoop
from tuner.study.plan import StudyPlan
from tuner.study.space import SearchSpace
from tuner.study.store_watch import StoreWatch
from variants import BASELINE, DTYPES

optuna.logging.set_verbosity(optuna.logging.WARNING)
BF16 = DTYPES["bf16"]


def _dead_workers_row(directory, study: str):
    config = next(c for c in SearchSpace(F.SMALL, BF16).configs if c != BASELINE)
    info = StudyInfo(gpu="h200", run_id="dead-worker", study=study, sampler="tpe", trial=0)
    row = trial_row(
        F.IDENTITY,
        F.SMALL,
        BF16,
        config,
        F.synthetic_bench(F.SMALL, BF16, config),
        F.copy_ms(F.SMALL, BF16),
        info,
    )
    write_table([row], directory / "h200", "dead-worker")
    return config


@pytest.mark.parametrize("study_of_row", ["s", "another study"])
def test_a_row_of_the_study_counts_against_its_budget_and_is_not_measured_again(
    tmp_path, study_of_row: str
) -> None:
    written = _dead_workers_row(tmp_path, study_of_row)
    runner = F.RecordingRunner()
    sink = ResultsSink(tmp_path, "h200", "run")
    watch = StoreWatch(tmp_path, "h200", F.SMALL, BF16, own=lambda: sink.files)
    plan = StudyPlan("h200", F.SMALL, BF16, "s", seed=0, trials=5)
    StudyLoop(plan, runner, None, run_id="run", sink=sink, watch=watch).run()
    measured = [c[2] for c in runner.calls]
    assert written not in measured and len(set(measured)) == len(measured)
    frame, _ = load_results(tmp_path)
    assert frame["config_key"].is_unique
    if study_of_row == "s":
        assert len(measured) == 4 and len(frame) == 5  # the dead worker's row is one of the five
    else:
        assert len(measured) == 5 and len(frame) == 6  # another study's row: not this budget


def test_the_study_keys_are_read_from_other_workers_files(tmp_path) -> None:
    written = _dead_workers_row(tmp_path, "s")
    watch = StoreWatch(tmp_path, "h200", F.SMALL, BF16)
    assert watch.study_keys("s") == {written.key} and watch.study_keys("t") == set()
    watch_other_shape = StoreWatch(tmp_path, "h200", F.SHAPE, BF16)
    assert watch_other_shape.study_keys("s") == set()


def test_a_parquet_of_another_schema_is_skipped_naming_the_missing_column(tmp_path, caplog) -> None:
    import pandas as pd

    written = _dead_workers_row(tmp_path, "s")
    pd.DataFrame({"a": [1, 2], "b": ["x", "y"]}).to_parquet(tmp_path / "h200" / "other.parquet")
    with caplog.at_level("WARNING", logger="tuner.study.store_watch"):
        watch = StoreWatch(tmp_path, "h200", F.SMALL, BF16)
    assert watch.study_keys("s") == {written.key}
    (message,) = [r.getMessage() for r in caplog.records if "other.parquet" in r.getMessage()]
    assert message.endswith("required column 'gpu' is missing"), message
