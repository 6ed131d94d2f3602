from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import optuna
import pandas as pd
import pytest
import tuner_fakes as F

from results.schema import Status
from tuner.run.rows import StudyInfo, trial_row
from tuner.runners.runner import Measurement
from tuner.study.claims import (
    claim,
    claims_on,
    distinct_done,
    finished_trial,
    mark,
    record,
    recorded,
    stored_answers,
)
from variants import BASELINE, DTYPES, FAMILIES

optuna.logging.set_verbosity(optuna.logging.WARNING)
BF16 = DTYPES["bf16"]
T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)


def _row(config, measurement: Measurement, *, gpu="h200", shape=F.SMALL, dtype=BF16, seconds=0) -> dict:
    row = trial_row(F.IDENTITY, shape, dtype, config, measurement, 1.0, StudyInfo(gpu=gpu, run_id="r"))
    return {**row, "timestamp": T0 + timedelta(seconds=seconds)}


def test_the_store_answers_with_the_median_ok_row_else_the_latest_failure() -> None:
    vec = FAMILIES["vec"].valid_configs(F.SMALL, BF16)[0]
    rows = [
        *(
            _row(BASELINE, Measurement(Status.OK, time_ms=t), seconds=i)
            for i, t in enumerate((3.0, 1.0, 2.0))
        ),
        _row(BASELINE, Measurement.failed(Status.TIMEOUT, "hung"), seconds=9),
        _row(vec, Measurement.failed(Status.CRASH, "first"), seconds=1),
        _row(vec, Measurement.failed(Status.WRONG_RESULT, "last"), seconds=2),
        _row(vec, Measurement(Status.OK, time_ms=0.5), gpu="h100"),  # another GPU
        _row(vec, Measurement(Status.OK, time_ms=0.5), dtype=DTYPES["fp16"]),  # another dtype
    ]
    answers = stored_answers(pd.DataFrame(rows), "h200", F.SMALL, BF16)
    assert set(answers) == {BASELINE.key, vec.key}
    assert answers[BASELINE.key]["time_ms"] == 2.0
    assert answers[vec.key]["status"] == Status.WRONG_RESULT and answers[vec.key]["message"] == "last"
    assert stored_answers(pd.DataFrame(columns=["gpu"]), "h200", F.SMALL, BF16) == {}


def test_rows_of_another_kernel_source_answer_nothing() -> None:
    frame = pd.DataFrame([_row(BASELINE, Measurement(Status.OK, time_ms=1.0))])
    frame["source_hash"] = "0" * 16
    assert stored_answers(frame, "h200", F.SMALL, BF16) == {}


def _finished(study: optuna.Study, key: str, status: Status, value: float) -> None:
    trial = study.ask()
    claim(trial, key)
    if status == Status.DUPLICATE:
        mark(trial, status)
    else:
        time_ms = value if status == Status.OK else math.inf
        record(trial, {"status": status.value, "time_ms": time_ms, "copy_ms": 0.5})
    study.tell(trial, value)


def test_a_finished_trial_answers_and_a_live_one_makes_others_yield() -> None:
    study = optuna.create_study()
    _finished(study, "a", Status.DUPLICATE, math.inf)  # yielded: answers nothing
    assert claims_on(study, "a", me=-1) == (None, False)
    _finished(study, "a", Status.OK, 1.5)
    finished, live = claims_on(study, "a", me=-1)
    assert finished is not None and finished.value == 1.5 and not live
    assert finished_trial(study, "a").number == 1  # the first trial that answers "a"
    running = study.ask()
    claim(running, "b")
    assert claims_on(study, "b", me=running.number) == (None, False)  # its own claim
    assert claims_on(study, "b", me=-1) == (None, True)
    study.tell(running, state=optuna.trial.TrialState.FAIL)  # its worker died: the claim goes
    assert claims_on(study, "b", me=-1) == (None, False)
    assert distinct_done(study) == {"a": 1.5}


@pytest.mark.parametrize("status", [Status.OK, Status.LAUNCH_ERROR])
def test_what_a_trial_records_is_what_another_worker_reads_back(status: Status) -> None:
    study = optuna.create_study()
    _finished(study, "k", status, 2.0 if status == Status.OK else math.inf)
    measurement, copy_ms = recorded(study.trials[0])
    assert measurement.status is status and copy_ms == 0.5
    assert measurement.time_ms == (2.0 if status == Status.OK else math.inf)


def test_only_rows_timed_alike_answer_a_run_that_names_its_hold() -> None:
    """Rows written before the hold was recorded (null) read as timed without one."""
    vec = FAMILIES["vec"].valid_configs(F.SMALL, BF16)[0]
    frame = pd.DataFrame(
        [
            {**_row(BASELINE, Measurement(Status.OK, time_ms=1.0)), "hold_us": None},
            {**_row(vec, Measurement(Status.OK, time_ms=2.0)), "hold_us": 150.0},
        ]
    )
    assert set(stored_answers(frame, "h200", F.SMALL, BF16, hold_us=0.0)) == {BASELINE.key}
    assert set(stored_answers(frame, "h200", F.SMALL, BF16, hold_us=150.0)) == {vec.key}
    assert set(stored_answers(frame, "h200", F.SMALL, BF16)) == {BASELINE.key, vec.key}  # any hold
    assert stored_answers(frame.drop(columns="hold_us"), "h200", F.SMALL, BF16, hold_us=150.0) == {}


def test_only_rows_of_the_runs_l2_state_answer_it() -> None:
    """Rows written before the state was recorded (null, or no column) read as cold."""
    vec = FAMILIES["vec"].valid_configs(F.SMALL, BF16)[0]
    frame = pd.DataFrame(
        [
            {**_row(BASELINE, Measurement(Status.OK, time_ms=1.0)), "l2": None},
            {**_row(vec, Measurement(Status.OK, time_ms=2.0)), "l2": "fed"},
        ]
    )
    assert set(stored_answers(frame, "h200", F.SMALL, BF16, l2="cold")) == {BASELINE.key}
    assert set(stored_answers(frame, "h200", F.SMALL, BF16, l2="fed")) == {vec.key}
    assert set(stored_answers(frame, "h200", F.SMALL, BF16)) == {BASELINE.key, vec.key}  # any state
    assert stored_answers(frame.drop(columns="l2"), "h200", F.SMALL, BF16, l2="fed") == {}
