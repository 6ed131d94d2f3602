"""Recording a race with fake timings: the rows the store reads back, the run they belong to,
what the index then makes of the raced shape, and writes that fail without raising."""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path

import pytest
import tuner_fakes as F

from results.index import build_index
from results.selection import generic_configs, shortlist
from results.store import load_results
from tuner.runners.race import run_race
from tuner.runners.race_record import RUN_ID_PREFIX, RaceRecorder, WrongResult, race_rows, race_run_id
from variants import DTYPES, Config, Shape

SHAPE = Shape(3, 1000, 32, 8, 128)
BF16 = DTYPES["bf16"]
# The shortlist: generic configurations that serve SHAPE (vec 16 bytes, vec 8, vec 4, gather).
CONFIGS: list[Config] = generic_configs(BF16)
COPY_MS = 0.030


def fake_race(times: dict[str, list[float] | Exception]):
    def time_candidate(config: Config) -> list[float]:
        found = times[config.key]
        if isinstance(found, Exception):
            raise found
        return found

    return run_race(CONFIGS, time_candidate, describe=lambda c: c.key)


def rows_of(result, run_id: str = "race-h200-20250101T000000-1", copy_ms: float | None = COPY_MS):
    return race_rows(
        result,
        lambda config: config,
        identity=F.IDENTITY,
        gpu="h200",
        shape=SHAPE,
        dtype=BF16,
        copy_ms=copy_ms,
        run_id=run_id,
    )


SAMPLES = {
    CONFIGS[0].key: [0.050, 0.052, 0.049, 0.051, 0.050, 0.053, 0.050],
    CONFIGS[1].key: [0.040, 0.041, 0.040, 0.042, 0.040, 0.040, 0.043],
    CONFIGS[2].key: RuntimeError("too many resources requested for launch"),
    CONFIGS[3].key: WrongResult("12 of 110592 elements wrong"),
}


def test_the_run_id_names_the_gpu_time_and_process() -> None:
    assert race_run_id("h200", now=0.0, pid=42) == "race-h200-19700101T000000-42"
    assert race_run_id("h100 pcie", now=0.0, pid=1) == "race-h100-pcie-19700101T000000-1"


def test_rows_hold_what_the_race_measured() -> None:
    result = fake_race(SAMPLES)
    assert result.winner == CONFIGS[1]
    rows = rows_of(result)
    assert [(r["config_key"], r["status"]) for r in rows] == [
        (CONFIGS[0].key, "ok"),
        (CONFIGS[1].key, "ok"),
        (CONFIGS[3].key, "wrong_result"),  # a launch error measured nothing: no row
    ]
    ok = rows[1]
    assert ok["time_ms"] == pytest.approx(0.040) and ok["reps"] == 7
    assert ok["p20_ms"] == pytest.approx(0.040) and ok["p80_ms"] == pytest.approx(0.0418)
    assert ok["copy_ms"] == COPY_MS and ok["ratio_to_copy"] == pytest.approx(0.040 / COPY_MS)
    assert ok["study"] == ok["sampler"] == "race" and ok["trial"] == 1
    assert (ok["gpu"], ok["gpu_name"], ok["sm_count"]) == ("h200", "NVIDIA H200", 132)
    assert (ok["B"], ok["T"], ok["NH"], ok["NH_KV"], ok["HD"], ok["dtype"]) == (3, 1000, 32, 8, 128, "bf16")
    wrong = rows[2]
    assert math.isinf(wrong["time_ms"]) and "elements wrong" in wrong["message"]


def test_a_copy_that_was_not_timed_is_left_empty_not_invented() -> None:
    rows = rows_of(fake_race(SAMPLES), copy_ms=None)
    assert all(r["copy_ms"] is None for r in rows)
    assert [r["ratio_to_copy"] for r in rows[:2]] == [None, None]


def test_recorded_rows_are_read_back_by_the_store(tmp_path: Path) -> None:
    recorder = RaceRecorder(tmp_path, now=0.0)
    result = fake_race(SAMPLES)
    path = recorder.record("h200", lambda run_id: rows_of(result, run_id))
    run_id = f"race-h200-19700101T000000-{os.getpid()}"
    assert path == tmp_path / "h200" / f"{run_id}.parquet" == recorder.path("h200")
    frame, report = load_results(tmp_path)
    assert not report.dropped and not report.skipped
    assert len(frame) == 3 and set(frame["run_id"]) == {run_id}
    assert run_id.startswith(RUN_ID_PREFIX)
    assert set(frame["gpu"]) == {"h200"} and set(frame["dtype"]) == {"bf16"}
    shapes = set(map(tuple, frame[["B", "T", "NH", "NH_KV", "HD"]].to_numpy().tolist()))
    assert shapes == {(3, 1000, 32, 8, 128)}
    assert sorted(frame["status"]) == ["ok", "ok", "wrong_result"]


def test_every_race_of_the_process_adds_to_one_run_file(tmp_path: Path) -> None:
    recorder = RaceRecorder(tmp_path, now=0.0)
    result = fake_race(SAMPLES)
    first = recorder.record("h200", lambda run_id: rows_of(result, run_id))
    second = recorder.record("h200", lambda run_id: rows_of(result, run_id))
    assert first == second
    frame, _ = load_results(tmp_path)
    assert len(frame) == 6 and frame["run_id"].nunique() == 1


def test_a_recorded_race_makes_the_shape_tuned_with_few_configurations(tmp_path: Path) -> None:
    recorder = RaceRecorder(tmp_path, now=0.0)
    result = fake_race(SAMPLES)
    recorder.record("h200", lambda run_id: rows_of(result, run_id))
    frame, report = load_results(tmp_path)
    index = build_index(frame, report)
    group = index.groups[("h200", (3, 1000, 32, 8, 128), "bf16")]
    assert group.best.config_key == CONFIGS[1].key
    assert len(group.candidates) == 2 and group.trials == 3  # visible as /shapes' configurations
    served = shortlist(index, "h200", SHAPE, BF16)
    # only vec ran correctly (gather's result was wrong): a partial match, its winner first; the
    # store holds no other shape to race it against, so none runs next time
    assert [c.match for c in served] == ["partial"]
    assert served[0].candidate.run_id.startswith(RUN_ID_PREFIX)


def test_a_write_that_fails_is_logged_once_and_does_not_raise(tmp_path: Path, caplog) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    recorder = RaceRecorder(blocker / "results", now=0.0)
    result = fake_race(SAMPLES)
    with caplog.at_level(logging.DEBUG, logger="tuner.runners.race_record"):
        assert recorder.record("h200", lambda run_id: rows_of(result, run_id)) is None
        assert recorder.record("h200", lambda run_id: rows_of(result, run_id)) is None
    warnings = [
        r for r in caplog.records if r.name == "tuner.runners.race_record" and r.levelno >= logging.WARNING
    ]
    assert len(warnings) == 1 and "could not record" in warnings[0].getMessage()
    assert recorder.failures == 2


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_directory_does_not_raise(tmp_path: Path) -> None:
    tmp_path.chmod(0o555)
    try:
        recorder = RaceRecorder(tmp_path, now=0.0)
        result = fake_race(SAMPLES)
        assert recorder.record("h200", lambda run_id: rows_of(result, run_id)) is None
    finally:
        tmp_path.chmod(0o755)


def test_a_write_refused_with_permission_denied_does_not_raise(tmp_path: Path, monkeypatch) -> None:
    """What a read-only directory answers, wherever the tests run (root writes anyway)."""
    import results.writing

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(tmp_path))

    monkeypatch.setattr(results.writing.tempfile, "mkstemp", refuse)
    recorder = RaceRecorder(tmp_path, now=0.0)
    result = fake_race(SAMPLES)
    assert recorder.record("h200", lambda run_id: rows_of(result, run_id)) is None
    assert recorder.failures == 1


def test_rows_kept_from_a_failed_write_go_out_with_the_next(tmp_path: Path) -> None:
    blocker = tmp_path / "results"
    blocker.write_text("")
    recorder = RaceRecorder(blocker, now=0.0)
    result = fake_race(SAMPLES)
    assert recorder.record("h200", lambda run_id: rows_of(result, run_id)) is None
    blocker.unlink()
    assert recorder.record("h200", lambda run_id: rows_of(result, run_id)) is not None
    frame, _ = load_results(blocker)
    assert len(frame) == 6


def test_a_failure_to_build_the_rows_does_not_raise(tmp_path: Path) -> None:
    def broken(run_id: str) -> list[dict]:
        raise RuntimeError("no device")

    assert RaceRecorder(tmp_path).record("h200", broken) is None
    assert not list(tmp_path.rglob("*.parquet"))


def test_a_race_that_measured_nothing_writes_nothing(tmp_path: Path) -> None:
    times = {c.key: RuntimeError("launch failed") for c in CONFIGS}
    result = fake_race(times)
    assert result.winner == CONFIGS[0] and not result.timed
    assert RaceRecorder(tmp_path).record("h200", lambda run_id: rows_of(result, run_id)) is None
    assert not list(tmp_path.rglob("*.parquet"))
