"""One GPU, shape and dtype: every trial with its block size, variant and search, the variant
x block-size heat map, the trials in the order measured, convergence, and the reference
times (llm.c's baseline and the copy)."""

from __future__ import annotations

import numpy as np
import pandas as pd

import variants
from results.best import baseline_rows, ranked, timed_as_served
from results.schema import Status, holds
from variants import Shape

from .rows import block_size, of_gpu, of_op, ok_rows, select_shape, usable, variant


def _text_column(frame: pd.DataFrame, column: str) -> pd.Series:
    if column not in frame:
        return pd.Series(None, index=frame.index, dtype=object)
    return frame[column].map(lambda v: v if isinstance(v, str) and v else None).astype(object)


def _series_label(sampler: str, seed: str, held: str) -> str:
    """'tpe seed 0', 'tpe seed 0, held 150 µs', 'seed 0', '' (parts that are empty left out)."""
    searched = " ".join(part for part in (sampler, f"seed {seed}" if seed else "") if part)
    return ", ".join(part for part in (searched, held) if part)


def search_series(frame: pd.DataFrame) -> pd.Series:
    """One name per search, short enough for a legend: the sampler and seed ('tpe seed 0'), and
    the hold where it timed with one ('tpe seed 0, held 150 µs'), where the study name is the
    same for every dtype and sampler. Searches are told apart by (study, else run id; sampler;
    seed; hold); two that would get one name are numbered in the order
    they started ('tpe seed 0, run 2/2'); with neither sampler nor seed, 'run 1/2'."""
    if frame.empty:
        return pd.Series(dtype=object, index=frame.index)
    study = _text_column(frame, "study").fillna(_text_column(frame, "run_id")).fillna("")
    sampler = _text_column(frame, "sampler")
    seeds = (
        pd.to_numeric(frame["seed"], errors="coerce") if "seed" in frame else pd.Series(np.nan, frame.index)
    )
    hold = holds(frame)
    keys = pd.Series(
        list(
            zip(
                study,
                sampler.fillna(""),
                seeds.map(lambda s: "" if pd.isna(s) else str(int(s))),
                hold.map(lambda h: f"held {h:g} µs" if h else ""),
                strict=True,
            )
        ),
        index=frame.index,
    )
    started = pd.to_datetime(frame["timestamp"], utc=True, errors="coerce") if "timestamp" in frame else None
    first = (
        started.groupby(keys, sort=False).min().sort_values(kind="stable").index.tolist()
        if started is not None
        else list(dict.fromkeys(keys))
    )
    for key in dict.fromkeys(keys):  # keys without a timestamp come last
        if key not in first:
            first.append(key)
    base = {key: _series_label(*key[1:]) for key in first}
    names: dict[tuple, str] = {}
    for label in dict.fromkeys(base.values()):
        same = [key for key in first if base[key] == label]
        for number, key in enumerate(same, start=1):
            if len(same) == 1:
                names[key] = label or "run"
            else:
                names[key] = f"{label}, run {number}/{len(same)}" if label else f"run {number}/{len(same)}"
    return keys.map(names).astype(object)


def shape_trials(
    frame: pd.DataFrame, gpu: str, shape: Shape, dtype: str, op: str | None = variants.DEFAULT_OP
) -> pd.DataFrame:
    """Every trial of op `op` (every op's with None) on one GPU, shape and dtype, with
    `block_size`, `variant`, `series` (one search, see `search_series`), `trial_number` (the
    sampler's trial number, else the order of timestamps in its search) and `measured` (1, 2,
    3... : the configurations that search measured, in the order it measured them; a sampler's
    pruned trials leave no row)."""
    rows = usable(of_op(select_shape(of_gpu(frame, gpu), shape, dtype), op)).copy()
    if rows.empty:
        return rows.assign(
            block_size=pd.Series(dtype="Int64"),
            variant=pd.Series(dtype=object),
            series=pd.Series(dtype=object),
            trial_number=pd.Series(dtype="Int64"),
            measured=pd.Series(dtype="Int64"),
        )
    rows["block_size"] = block_size(rows)
    rows["variant"] = variant(rows)
    rows["series"] = search_series(rows)
    when = pd.to_datetime(rows["timestamp"], utc=True, errors="coerce") if "timestamp" in rows else None
    number = (
        pd.to_numeric(rows["trial"], errors="coerce") if "trial" in rows else pd.Series(np.nan, rows.index)
    )
    ordered = rows.assign(_when=when, _number=number).sort_values(
        ["series", "_when", "_number"], kind="stable", na_position="last"
    )
    by_time = ordered.groupby("series", sort=False).cumcount()
    rows["trial_number"] = number.fillna(by_time).astype("Int64")
    rows["measured"] = (by_time + 1).astype("Int64")
    return rows.sort_values(["series", "measured"], kind="stable")


def heatmap(trials: pd.DataFrame) -> pd.DataFrame:
    """Variant x block size: the best correct time (ms) of the rows timed as the group's
    ranking leads with (`timed_as_served`). Rows fastest first; NaN = not measured."""
    ok = ok_rows(timed_as_served(trials)).dropna(subset=["block_size"])
    if ok.empty:
        return pd.DataFrame()
    ok = ok.assign(time_ms=pd.to_numeric(ok["time_ms"], errors="coerce"))
    table = ok.pivot_table(index="variant", columns="block_size", values="time_ms", aggfunc="min")
    table = table.reindex(sorted(table.columns), axis=1)
    return table.loc[table.min(axis=1).sort_values(kind="stable").index]


def heatmap_winner(trials: pd.DataFrame) -> dict | None:
    """The winner's cell of the heat map: {'variant', 'block_size', 'time_ms'} of the
    configuration the group is served first (`ranked`, as /best and the page's summary name
    it; its time is the row it stands by), or None without one. Runs are compared scaled onto
    the group's reference run and a configuration stands by its newest run, so this need not be
    the cell of the lowest time."""
    if trials.empty:
        return None
    best = ranked(trials)
    if best.empty or pd.isna(best["block_size"].iloc[0]):
        return None
    row = best.iloc[0]
    return {
        "variant": row["variant"],
        "block_size": int(row["block_size"]),
        "time_ms": float(row["time_ms"]),
    }


def scatter(trials: pd.DataFrame) -> pd.DataFrame:
    """Every trial: its search, number measured, time (NaN for failures), family, configuration."""
    columns = [
        "series",
        "measured",
        "trial_number",
        "time_ms",
        "family",
        "config_key",
        "status",
        "block_size",
    ]
    out = trials[columns].copy()
    out["time_ms"] = pd.to_numeric(out["time_ms"], errors="coerce").replace([np.inf, -np.inf], np.nan)
    out.loc[out["status"] != Status.OK, "time_ms"] = np.nan
    return out.reset_index(drop=True)


def convergence(trials: pd.DataFrame) -> pd.DataFrame:
    """Best correct time so far after each configuration measured, per search (NaN until the
    first success)."""
    if trials.empty:
        return pd.DataFrame(columns=["series", "measured", "best_so_far_ms"])
    times = pd.to_numeric(trials["time_ms"], errors="coerce").where(trials["status"] == Status.OK, np.inf)
    frame = trials[["series", "measured"]].assign(time_ms=times.fillna(np.inf))
    frame = frame.sort_values(["series", "measured"], kind="stable")
    frame["best_so_far_ms"] = frame.groupby("series")["time_ms"].cummin().replace(np.inf, np.nan)
    return frame[["series", "measured", "best_so_far_ms"]].reset_index(drop=True)


def reference_times(trials: pd.DataFrame) -> dict[str, float | None]:
    """llm.c's baseline (naive, block 128; median of its correct trials) and the copy's median,
    of the rows timed as the group's ranking leads with (`timed_as_served`)."""
    rows = timed_as_served(trials)
    base = pd.to_numeric(baseline_rows(ok_rows(rows))["time_ms"], errors="coerce").dropna()
    copy = pd.to_numeric(rows.get("copy_ms", pd.Series(dtype=float)), errors="coerce").dropna()
    copy = copy[np.isfinite(copy) & (copy > 0)]
    return {
        "baseline_ms": float(base.median()) if len(base) else None,
        "copy_ms": float(copy.median()) if len(copy) else None,
    }
