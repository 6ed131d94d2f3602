"""Selecting winners from trial rows: the fastest correct configuration per GPU, shape and
dtype, with its speed-up over llm.c's baseline measured in the same study."""

from __future__ import annotations

import json

import pandas as pd

from results.schema import GROUP_COLUMNS, Status
from variants import BASELINE

# llm.c's configuration (naive, block 128) as it appears in a trial row
BASELINE_FAMILY = BASELINE.family
BASELINE_PARAMS = json.dumps(BASELINE.values, sort_keys=True)


def ok_rows(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[(frame["status"] == Status.OK) & frame["time_ms"].notna()]


def baseline_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The correct trials of llm.c's configuration."""
    ok = ok_rows(frame)
    return ok[(ok["family"] == BASELINE_FAMILY) & (ok["params"] == BASELINE_PARAMS)]


def baseline_times(frame: pd.DataFrame) -> pd.DataFrame:
    """Median of llm.c's configuration (naive, block 128) per group, as `baseline_ms`."""
    base = baseline_rows(frame)
    return (
        base.groupby(list(GROUP_COLUMNS), as_index=False)["time_ms"]
        .median()
        .rename(columns={"time_ms": "baseline_ms"})
    )


def winners(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (gpu, shape, dtype): the fastest ok trial, with `baseline_ms` and
    `speedup_vs_baseline` (NaN where the baseline was not measured)."""
    ok = ok_rows(frame)
    if ok.empty:
        return ok.assign(baseline_ms=pd.Series(dtype=float), speedup_vs_baseline=pd.Series(dtype=float))
    best = ok.sort_values(["time_ms", "timestamp"]).drop_duplicates(list(GROUP_COLUMNS), keep="first")
    best = best.merge(baseline_times(frame), on=list(GROUP_COLUMNS), how="left")
    best["speedup_vs_baseline"] = best["baseline_ms"] / best["time_ms"]
    return best.sort_values(list(GROUP_COLUMNS)).reset_index(drop=True)
