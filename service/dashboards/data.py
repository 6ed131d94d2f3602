"""The dashboards' data: pure functions from trial rows to small DataFrames."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from results.best import winners
from results.schema import GROUP_COLUMNS, SHAPE_COLUMNS, STATUS_OK
from variants import Shape

OVERVIEW_COLUMNS = [
    *GROUP_COLUMNS,
    "shape",
    "family",
    "config_key",
    "time_ms",
    "gbps",
    "ratio_to_copy",
    "baseline_ms",
    "speedup_vs_baseline",
    "trials",
]


def shape_label(row: pd.Series | dict) -> str:
    return " ".join(f"{c}={int(row[c])}" for c in SHAPE_COLUMNS)


def _params(text: object) -> dict:
    try:
        value = json.loads(text) if isinstance(text, str) else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def block_size(frame: pd.DataFrame) -> pd.Series:
    """Threads per block of every row: the recorded launch `block`, else from the params
    (`block`, or 32 * `warps` for warp_per_head). Int64, NA where neither is known."""

    def from_params(text: object) -> float:
        p = _params(text)
        if isinstance(p.get("block"), int):
            return float(p["block"])
        if isinstance(p.get("warps"), int):
            return float(32 * p["warps"])
        return math.nan

    recorded = (
        pd.to_numeric(frame["block"], errors="coerce") if "block" in frame else pd.Series(np.nan, frame.index)
    )
    derived = frame["params"].map(from_params) if len(frame) else pd.Series(dtype=float)
    return recorded.fillna(derived).astype("Int64")


def variant(frame: pd.DataFrame) -> pd.Series:
    """The family with every parameter but the block size: 'vec load=ldg store=plain vec_bytes=16'."""

    def name(family: str, text: object) -> str:
        rest = [f"{k}={v}" for k, v in sorted(_params(text).items()) if k not in ("block", "warps")]
        return " ".join([family, *rest])

    return pd.Series(
        [name(f, p) for f, p in zip(frame["family"], frame["params"], strict=True)],
        index=frame.index,
        dtype=object,
    )


def overview(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per GPU x shape x dtype: the winner, its time, GB/s, fraction of the copy and
    speed-up over llm.c's kernel1 at block 128, and the number of trials."""
    best = winners(frame)
    if best.empty:
        return pd.DataFrame(columns=OVERVIEW_COLUMNS)
    counts = frame.groupby(list(GROUP_COLUMNS)).size().rename("trials").reset_index()
    best = best.merge(counts, on=list(GROUP_COLUMNS), how="left")
    best["shape"] = best.apply(shape_label, axis=1)
    return best[OVERVIEW_COLUMNS].reset_index(drop=True)


def shape_trials(frame: pd.DataFrame, gpu: str, shape: Shape, dtype: str) -> pd.DataFrame:
    """Every trial of one GPU, shape and dtype, with `block_size`, `variant`, `trial_number`
    (the recorded trial, else the order of timestamps per run) and `series` (one search)."""
    mask = (frame["gpu"] == gpu) & (frame["dtype"] == dtype)
    for column in SHAPE_COLUMNS:
        mask &= frame[column] == getattr(shape, column)
    rows = frame[mask.to_numpy(dtype=bool, na_value=False)].copy()
    if rows.empty:
        return rows.assign(
            block_size=pd.Series(dtype="Int64"),
            variant=pd.Series(dtype=object),
            trial_number=pd.Series(dtype="Int64"),
            series=pd.Series(dtype=object),
        )
    rows["block_size"] = block_size(rows)
    rows["variant"] = variant(rows)
    study = rows["study"].where(rows["study"].notna(), rows["run_id"]) if "study" in rows else rows["run_id"]
    seed = rows["seed"].map(lambda s: "" if pd.isna(s) else f" seed={int(s)}") if "seed" in rows else ""
    rows["series"] = study.astype(str) + seed
    order = rows.sort_values("timestamp", kind="stable").groupby("series").cumcount()
    rows["trial_number"] = pd.to_numeric(rows["trial"], errors="coerce").fillna(order).astype("Int64")
    return rows.sort_values(["series", "trial_number"], kind="stable")


def _ok(trials: pd.DataFrame) -> pd.DataFrame:
    times = pd.to_numeric(trials["time_ms"], errors="coerce")
    return trials[(trials["status"] == STATUS_OK) & np.isfinite(times)]


def heatmap(trials: pd.DataFrame) -> pd.DataFrame:
    """Variant x block size: the best correct time (ms). Rows fastest first; NaN = not measured."""
    ok = _ok(trials).dropna(subset=["block_size"])
    if ok.empty:
        return pd.DataFrame()
    table = ok.pivot_table(index="variant", columns="block_size", values="time_ms", aggfunc="min")
    table = table.reindex(sorted(table.columns), axis=1)
    return table.loc[table.min(axis=1).sort_values(kind="stable").index]


def scatter(trials: pd.DataFrame) -> pd.DataFrame:
    """Every trial: number, time (NaN for failures), family, configuration, status."""
    columns = ["series", "trial_number", "time_ms", "family", "config_key", "status", "block_size"]
    out = trials[columns].copy()
    out["time_ms"] = pd.to_numeric(out["time_ms"], errors="coerce").replace([np.inf, -np.inf], np.nan)
    out.loc[out["status"] != STATUS_OK, "time_ms"] = np.nan
    return out.reset_index(drop=True)


def convergence(trials: pd.DataFrame) -> pd.DataFrame:
    """Best correct time so far after each trial, per search (NaN until the first success)."""
    if trials.empty:
        return pd.DataFrame(columns=["series", "trial_number", "best_so_far_ms"])
    times = pd.to_numeric(trials["time_ms"], errors="coerce").where(trials["status"] == STATUS_OK, np.inf)
    frame = trials[["series", "trial_number"]].assign(time_ms=times.fillna(np.inf))
    frame = frame.sort_values(["series", "trial_number"], kind="stable")
    frame["best_so_far_ms"] = frame.groupby("series")["time_ms"].cummin().replace(np.inf, np.nan)
    return frame[["series", "trial_number", "best_so_far_ms"]].reset_index(drop=True)


def reference_times(trials: pd.DataFrame) -> dict[str, float | None]:
    """llm.c's baseline (naive, block 128; median of its correct trials) and the copy's median."""
    from results.best import baseline_rows

    base = baseline_rows(_ok(trials))["time_ms"]
    copy = pd.to_numeric(trials.get("copy_ms", pd.Series(dtype=float)), errors="coerce").dropna()
    copy = copy[np.isfinite(copy)]
    return {
        "baseline_ms": float(base.median()) if len(base) else None,
        "copy_ms": float(copy.median()) if len(copy) else None,
    }


def gpu_comparison(frame: pd.DataFrame, shape: Shape, dtype: str) -> pd.DataFrame:
    """The same shape and dtype on every GPU: the winner of each, side by side."""
    table = overview(frame)
    mask = table["dtype"] == dtype
    for column in SHAPE_COLUMNS:
        mask &= table[column] == getattr(shape, column)
    return table[mask].sort_values("gpu").reset_index(drop=True)


def family_best(frame: pd.DataFrame, shape: Shape, dtype: str) -> pd.DataFrame:
    """GPU x family: the best correct time and its fraction of the copy."""
    mask = frame["dtype"] == dtype
    for column in SHAPE_COLUMNS:
        mask &= frame[column] == getattr(shape, column)
    ok = _ok(frame[mask.to_numpy(dtype=bool, na_value=False)])
    if ok.empty:
        return pd.DataFrame(columns=["gpu", "family", "time_ms", "ratio_to_copy"])
    best = ok.sort_values("time_ms", kind="stable").drop_duplicates(["gpu", "family"])
    return (
        best[["gpu", "family", "time_ms", "ratio_to_copy"]]
        .sort_values(["gpu", "family"])
        .reset_index(drop=True)
    )
