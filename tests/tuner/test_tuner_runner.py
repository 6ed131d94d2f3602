from __future__ import annotations

import math

import pytest

from results.schema import Status
from tuner.runner import Measurement


def test_a_measurement_holds_one_of_the_closed_set_of_statuses() -> None:
    assert Measurement("ok", time_ms=1.0).status is Status.OK
    assert Measurement(Status.OK, time_ms=1.0).ok
    failed = Measurement.failed(Status.CRASH, "x" * 5000)
    assert failed.status is Status.CRASH and not failed.ok
    assert math.isinf(failed.time_ms) and len(failed.message) == 2000
    with pytest.raises(ValueError):
        Measurement("segfault")
