from __future__ import annotations

import math

import pytest
import tuner_fakes as F

from results.schema import Status
from tuner.runners.replay import ReplayRunner
from tuner.runners.runner import Measurement, Runner
from variants import BASELINE, DTYPES

BF16 = DTYPES["bf16"]


def test_a_measurement_holds_one_of_the_closed_set_of_statuses() -> None:
    assert Measurement("ok", time_ms=1.0).status is Status.OK
    assert Measurement(Status.OK, time_ms=1.0).ok
    failed = Measurement.failed(Status.CRASH, "x" * 5000)
    assert failed.status is Status.CRASH and not failed.ok
    assert math.isinf(failed.time_ms) and len(failed.message) == 2000
    with pytest.raises(ValueError):
        Measurement("segfault")


def test_every_runner_keeps_the_whole_contract(tmp_path) -> None:
    F.write_recording(tmp_path, [F.SMALL], ["bf16"])
    for runner in (F.synthetic_runner(), ReplayRunner.from_directory(tmp_path)):
        assert isinstance(runner, Runner)
        with runner as r:
            assert r.prepare([(F.SMALL, BF16, BASELINE)]) == 0  # nothing to prepare by default
            assert r.measure(F.SMALL, BF16, BASELINE).ok and r.copy_time(F.SMALL, BF16) > 0
            assert not r.missing


def test_a_runner_must_measure_and_time_the_copy() -> None:
    class Half(Runner):
        def copy_time(self, shape, dtype) -> float:
            return 1.0

    with pytest.raises(TypeError, match="measure"):
        Half()  # type: ignore[abstract]
