"""One trial row's cells as Python values, where a missing, NaN or unreadable cell is None
(the results index reads every row through these)."""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Any

import pandas as pd


def finite_or_none(value: Any) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def int_or_none(value: Any) -> int | None:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def timestamp_or_none(value: Any) -> datetime | None:
    if isinstance(value, pd.Timestamp):  # as the store's rows hold it
        return value.to_pydatetime()
    if value is None or value is pd.NaT or (isinstance(value, float) and math.isnan(value)):
        return None
    try:
        return pd.Timestamp(value).to_pydatetime()
    except (TypeError, ValueError):
        return None


def json_object_or_none(value: Any) -> dict[str, Any] | None:
    """A cell of JSON text (a row's `params`) as the object it holds, or None where it is not
    text, not JSON or not an object."""
    try:
        parsed = json.loads(value)
    except (TypeError, ValueError):
        return None
    return parsed if isinstance(parsed, dict) else None
