"""A trial row's cells as Python values: what is missing or unreadable is None."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from results.cells import finite_or_none, json_object_or_none, timestamp_or_none


@pytest.mark.parametrize("text", [None, float("nan"), "", "not json", "[1, 2]", "3", '"block"', b"\xff"])
def test_params_that_are_not_a_json_object_are_none(text: object) -> None:
    assert json_object_or_none(text) is None


def test_a_json_object_is_read_whole() -> None:
    assert json_object_or_none('{"block": 256, "load": "ldg"}') == {"block": 256, "load": "ldg"}


def test_a_stored_timestamp_is_a_datetime_with_its_zone_and_a_missing_one_none() -> None:
    stamp = pd.Timestamp("2026-12-01T10:00:00.123456Z")
    assert timestamp_or_none(stamp) == stamp.to_pydatetime() and timestamp_or_none(stamp).tzinfo is not None
    assert timestamp_or_none(pd.NaT) is None and timestamp_or_none(None) is None
    assert timestamp_or_none(float("nan")) is None and timestamp_or_none("not a time") is None


def test_times_that_are_not_finite_are_none() -> None:
    assert finite_or_none(math.inf) is None and finite_or_none("x") is None and finite_or_none(0.5) == 0.5
