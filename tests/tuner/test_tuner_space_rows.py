from __future__ import annotations

import json
import math

import optuna
import pytest
import tuner_fakes as F

from results.schema import Status
from results.store import to_table
from tuner.rows import ResultsSink, StudyInfo, objective_value, trial_row
from tuner.runner import Measurement
from tuner.space import SearchSpace
from variants import BASELINE, DTYPES, FAMILIES, Shape, valid_configs


def test_space_holds_exactly_the_valid_configs_and_round_trips_them() -> None:
    space = SearchSpace(F.SHAPE, DTYPES["bf16"])
    assert sorted(c.key for c in space.configs) == sorted(
        c.key for c in valid_configs(F.SHAPE, DTYPES["bf16"])
    )
    for config in space.configs:
        trial = optuna.trial.FixedTrial(space.params_of(config))
        assert space.suggest(trial) == config
        assert space.config_of(space.params_of(config)) == config
    assert BASELINE in space


def test_invalid_combinations_are_not_offered_or_come_back_as_none() -> None:
    # HD=2 in bf16: 8- and 16-byte vectors do not divide a head; split takes only those.
    shape = Shape.parse("B=1,T=4,NH=4,NH_KV=2,HD=2")
    space = SearchSpace(shape, DTYPES["bf16"])
    assert "split" not in space.family_names
    assert space.offered["vec_bytes"] == (4,)
    fp32 = SearchSpace(shape, DTYPES["fp32"])
    assert fp32.offered["vec_bytes"] == (4, 8)  # vec takes 4 and 8, split only 8
    bad = {"family": "split", "block": 256, "vec_bytes": 4, "items": 1, "load": "plain", "store": "plain"}
    assert fp32.suggest(optuna.trial.FixedTrial(bad)) is None


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


def test_a_failure_row_has_infinite_time_and_value() -> None:
    row = _row(Measurement.failed(Status.LAUNCH_ERROR, "too many resources requested"))
    assert row["status"] == Status.LAUNCH_ERROR
    assert math.isinf(row["time_ms"]) and math.isinf(row["ratio_to_copy"]) and row["gbps"] is None
    assert objective_value(row) == math.inf


def test_sink_flushes_every_row_and_splits_long_runs_into_parts(tmp_path) -> None:
    sink = ResultsSink(tmp_path, "h200", "run-1", part_rows=3)
    row = _row(Measurement(Status.OK, time_ms=1.0))
    for _ in range(7):
        sink.append(dict(row))
    names = sorted(p.name for p in (tmp_path / "h200").iterdir())
    assert names == ["run-1.1.parquet", "run-1.2.parquet", "run-1.parquet"]
    from results.store import load_results

    frame, report = load_results(tmp_path)
    assert len(frame) == 7 and not report.skipped
