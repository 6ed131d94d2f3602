from __future__ import annotations

import json
import math

import pandas as pd
import pytest
import tuner_fakes as F

from results.schema import Status
from results.store import to_table
from tuner.run.rows import ResultsSink, StudyInfo, objective_value, trial_row
from tuner.runners.runner import Measurement
from variants import DTYPES, FAMILIES


def _row(measurement: Measurement) -> dict:
    info = StudyInfo(gpu="h200", run_id="run-1", study="s", sampler="tpe", seed=7, trial=3)
    config = next(c for c in FAMILIES["vec"].valid_configs(F.SHAPE, DTYPES["bf16"]))
    return trial_row(F.IDENTITY, F.SHAPE, DTYPES["bf16"], config, measurement, 0.5, info)


def test_trial_row_derives_bandwidth_ratio_and_kernel_identity() -> None:
    row = _row(Measurement(Status.OK, time_ms=1.0, p20_ms=0.9, p80_ms=1.1, reps=20))
    moved = F.SHAPE.bytes_moved(DTYPES["bf16"])
    assert row["bytes_moved"] == moved
    assert row["gbps"] == pytest.approx(moved / 1e-3 / 1e9)
    assert row["ratio_to_copy"] == pytest.approx(2.0)
    assert json.loads(row["params"]) == dict(json.loads(row["params"]))
    assert row["params"] == json.dumps(json.loads(row["params"]), sort_keys=True)
    assert row["name_expression"].startswith("repkv_vec<__nv_bfloat16")
    assert row["source_hash"] == FAMILIES["vec"].source_hash
    assert row["grid"] > 0 and row["block"] > 0 and row["sm_count"] == 132
    assert objective_value(row) == pytest.approx(2.0)
    assert to_table(__import__("pandas").DataFrame([row])).num_rows == 1
    assert row["hold_us"] is None  # the fake identity says nothing of its timing


def test_a_row_records_the_hold_it_was_timed_with() -> None:
    from dataclasses import replace

    info = StudyInfo(gpu="h200", run_id="run-1", study="s", sampler="tpe", seed=7, trial=3)
    config = next(c for c in FAMILIES["vec"].valid_configs(F.SHAPE, DTYPES["bf16"]))
    measurement = Measurement(Status.OK, time_ms=1.0, reps=20)
    held = replace(F.IDENTITY, hold_us=150.0)
    row = trial_row(held, F.SHAPE, DTYPES["bf16"], config, measurement, 0.5, info)
    assert row["hold_us"] == 150.0
    table = to_table(pd.DataFrame([row]))
    assert table.column("hold_us").to_pylist() == [150.0]


def test_a_row_records_how_its_copy_was_timed() -> None:
    from dataclasses import replace

    from results.schema import COPY_FASTEST

    info = StudyInfo(gpu="h200", run_id="run-1", study="s", sampler="tpe", seed=7, trial=3)
    config = next(c for c in FAMILIES["vec"].valid_configs(F.SHAPE, DTYPES["bf16"]))
    measurement = Measurement(Status.OK, time_ms=1.0, reps=20)
    before = trial_row(F.IDENTITY, F.SHAPE, DTYPES["bf16"], config, measurement, 0.5, info)
    assert before["copy_method"] is None
    timed = replace(F.IDENTITY, copy_method=COPY_FASTEST)
    row = trial_row(timed, F.SHAPE, DTYPES["bf16"], config, measurement, 0.5, info)
    assert row["copy_method"] == COPY_FASTEST
    assert to_table(pd.DataFrame([row])).column("copy_method").to_pylist() == [COPY_FASTEST]


def test_a_failure_row_has_infinite_time_and_value() -> None:
    row = _row(Measurement.failed(Status.LAUNCH_ERROR, "too many resources requested"))
    assert row["status"] == Status.LAUNCH_ERROR
    assert math.isinf(row["time_ms"]) and math.isinf(row["ratio_to_copy"]) and row["gbps"] is None
    assert objective_value(row) == math.inf


def test_sink_flushes_every_row_and_splits_long_runs_into_parts(tmp_path) -> None:
    sink = ResultsSink(tmp_path, "h200", "run-1", part_rows=3)
    row = _row(Measurement(Status.OK, time_ms=1.0))
    for number in range(7):
        sink.append({**row, "trial": number})  # seven trials (the same row twice is one trial)
    names = sorted(p.name for p in (tmp_path / "h200").iterdir())
    assert names == ["run-1.1.parquet", "run-1.2.parquet", "run-1.parquet"]
    from results.store import load_results

    frame, report = load_results(tmp_path)
    assert len(frame) == 7 and not report.skipped


def test_two_runs_of_one_process_in_one_second_get_different_ids() -> None:
    from tuner.run.rows import new_run_id

    first, second, third = (new_run_id(now=1_700_000_000.0) for _ in range(3))
    assert first != second != third != first
    assert second == f"{first}-2" and third == f"{first}-3"


def test_a_row_carries_the_runs_empty_launch() -> None:
    from dataclasses import replace

    m = Measurement(status=Status.OK, time_ms=0.1, p20_ms=0.1, p80_ms=0.1, reps=50)
    config = FAMILIES["vec"].valid_configs(F.SMALL, DTYPES["bf16"])[0]
    info = StudyInfo(gpu="h200", run_id="r", study="s", sampler="tpe")
    timed = replace(F.IDENTITY, empty_launch_ms=0.0035)
    assert trial_row(timed, F.SMALL, DTYPES["bf16"], config, m, 0.05, info)["empty_launch_ms"] == 0.0035
    assert trial_row(F.IDENTITY, F.SMALL, DTYPES["bf16"], config, m, 0.05, info)["empty_launch_ms"] is None
    table = to_table(pd.DataFrame([trial_row(timed, F.SMALL, DTYPES["bf16"], config, m, 0.05, info)]))
    assert table.column("empty_launch_ms").to_pylist() == [0.0035]  # the schema holds it


def test_a_row_records_the_l2_state_it_was_timed_in() -> None:
    from dataclasses import replace

    info = StudyInfo(gpu="h200", run_id="run-1", study="s", sampler="tpe", seed=7, trial=3)
    config = next(c for c in FAMILIES["vec"].valid_configs(F.SHAPE, DTYPES["bf16"]))
    measurement = Measurement(Status.OK, time_ms=1.0, reps=20)
    row = trial_row(replace(F.IDENTITY, l2="fed"), F.SHAPE, DTYPES["bf16"], config, measurement, 0.5, info)
    assert to_table(pd.DataFrame([row])).column("l2").to_pylist() == ["fed"]
