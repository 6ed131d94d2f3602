from __future__ import annotations

from datetime import datetime, timezone

import pandas as pd
import pytest

from results.schema import FAILURES, STATUSES, TRIAL_SCHEMA, Status
from results.store import to_table


def test_a_status_is_the_plain_string_of_the_parquet_column() -> None:
    assert Status.OK == "ok" and Status("compile_error") is Status.COMPILE_ERROR
    assert str(Status.WRONG_RESULT) == "wrong_result" and f"{Status.TIMEOUT}" == "timeout"
    assert TRIAL_SCHEMA.field("status").type == "string"
    with pytest.raises(ValueError):
        Status("segfault")


def test_rows_hold_every_status_but_the_study_internal_ones() -> None:
    assert set(STATUSES) == set(Status) - {Status.MISSING, Status.DUPLICATE}
    assert set(FAILURES) == set(STATUSES) - {Status.OK, Status.INVALID}


def test_a_status_is_written_as_a_plain_string() -> None:
    row = {
        **dict(gpu="h200", B=1, T=256, NH=14, NH_KV=2, HD=64, dtype="bf16", family="vec"),
        **dict(params="{}", config_key="vec[]", time_ms=float("inf"), run_id="r"),
        **dict(status=Status.CRASH, timestamp=datetime(2025, 1, 1, tzinfo=timezone.utc)),
    }
    column = to_table(pd.DataFrame([row])).column("status").to_pylist()
    assert column == ["crash"] and type(column[0]) is str
