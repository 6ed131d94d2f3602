"""Selecting winners from trial rows: the fastest correct configuration per GPU, shape and
dtype, with its speed-up over llm.c's baseline measured in the same study."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import numpy as np
import pandas as pd

import variants
from results.schema import DEFAULT_HOLD_US, GROUP_COLUMNS, L2_COLD, Status, holds, l2_states, ops_of, with_op

# llm.c's configuration of repkv backward (naive, block 128) as it appears in a trial row
BASELINE_FAMILY = variants.BASELINE.family
BASELINE_PARAMS = json.dumps(variants.BASELINE.values, sort_keys=True)


def in_l2_state(frame: pd.DataFrame, l2: str = L2_COLD) -> pd.DataFrame:
    """The rows timed with L2 in state `l2` (results.schema.L2_STATES): each state is ranked,
    served and compared among its own rows alone."""
    return frame[l2_states(frame) == l2]


def ok_rows(frame: pd.DataFrame, l2: str = L2_COLD) -> pd.DataFrame:
    """The correct trials of one L2 state."""
    frame = with_op(in_l2_state(frame, l2))
    return frame[(frame["status"] == Status.OK) & frame["time_ms"].notna()]


def baseline_rows(frame: pd.DataFrame, l2: str = L2_COLD) -> pd.DataFrame:
    """The correct trials of llm.c's configuration of each row's op (`Op.baseline`)."""
    ok = ok_rows(frame, l2)
    op = ops_of(ok)
    mask = pd.Series(False, index=ok.index)
    for name, descriptor in variants.OPS.items():
        params = json.dumps(descriptor.baseline.values, sort_keys=True)
        mask |= (op == name) & (ok["family"] == descriptor.baseline.family) & (ok["params"] == params)
    return ok[mask]


def other_timing(rows: pd.DataFrame) -> pd.Series:
    """Per row, whether it was timed otherwise than the tuner times (`DEFAULT_HOLD_US`)."""
    return holds(rows) != DEFAULT_HOLD_US


def timed_as_served(frame: pd.DataFrame, l2: str = L2_COLD) -> pd.DataFrame:
    """Per (gpu, shape, dtype), the rows of the timing its served ranking leads with: those of
    L2 state `l2` timed as the tuner times (`DEFAULT_HOLD_US`) where the group has any, else
    all of its rows of that state. What compares times within a group (a heat map, a family's
    best, the baseline) reads these, so that no time taken one way is set against one taken
    the other."""
    frame = with_op(in_l2_state(frame, l2))
    if frame.empty:
        return frame
    other = other_timing(frame)
    first = other.groupby([frame[c] for c in GROUP_COLUMNS], dropna=False).transform("min")
    return frame[other <= first]


def baseline_times(frame: pd.DataFrame, l2: str = L2_COLD) -> pd.DataFrame:
    """Median of llm.c's configuration (naive, block 128) per group, as `baseline_ms`: of its
    rows timed as the tuner times where a group has any (as `ranked` prefers them)."""
    base = timed_as_served(baseline_rows(frame, l2), l2)
    return (
        base.groupby(list(GROUP_COLUMNS), as_index=False)["time_ms"]
        .median()
        .rename(columns={"time_ms": "baseline_ms"})
    )


def run_factors(rows: pd.DataFrame) -> pd.Series:
    """Per row, the factor that puts its run's times on the scale of its group's reference run
    (the run that measured the most configurations of the group, the latest of equals).

    Runs are linked one at a time, the widest overlap first: a run that measured
    configurations a linked run also measured is scaled by the median ratio of their times
    there; a run that shares none with any keeps 1 (its absolute times stand). The GPU drifts
    a few per cent between runs (clocks, temperature, neighbours), so two configurations are
    compared as their runs saw the same work wherever the runs overlap. A device copy is not
    used as the link: one copy timing is as noisy as the drift it would remove."""
    factors = pd.Series(1.0, index=rows.index)
    if rows.empty:
        return factors
    keyed = with_op(rows)
    group = keyed.groupby([keyed[c] for c in GROUP_COLUMNS], sort=False, dropna=False).ngroup()
    runs = pd.DataFrame(
        {"group": group, **{c: rows[c] for c in ("run_id", "config_key", "time_ms", "timestamp")}}
    )
    per_group = runs.groupby("group")["run_id"].nunique()
    runs = runs[runs["group"].isin(per_group.index[per_group >= 2])]
    # group -> run -> configuration -> its fastest time in that run; group -> run -> latest row
    times: dict[int, dict[str, dict[str, float]]] = defaultdict(dict)
    for (g, run, key), time_ms in runs.groupby(["group", "run_id", "config_key"])["time_ms"].min().items():
        times[g].setdefault(run, {})[key] = float(time_ms)
    newest: dict[int, dict[str, Any]] = defaultdict(dict)
    for (g, run), stamp in runs.groupby(["group", "run_id"])["timestamp"].max().items():
        newest[g][run] = stamp
    scales = {g: _link_runs(by_run, newest[g]) for g, by_run in times.items()}
    mapped = [scales.get(g, {}).get(run, 1.0) for g, run in zip(group, rows["run_id"], strict=True)]
    return pd.Series(mapped, index=rows.index, dtype=float)


def _link_runs(by_run: dict[str, dict[str, float]], newest: dict[str, Any]) -> dict[str, float]:
    """run_id -> factor for one group (see `run_factors`), from each run's fastest time per
    configuration and its latest timestamp."""

    def size_then_recency(run: str) -> tuple:
        stamp = newest.get(run)
        return (len(by_run[run]), pd.notna(stamp), stamp if pd.notna(stamp) else 0)

    scale = {max(by_run, key=size_then_recency): 1.0}
    pending = set(by_run) - set(scale)
    while pending:
        links = []  # (configurations shared, run, factor)
        for run in sorted(pending):
            times = by_run[run]
            for known, factor in scale.items():
                reference = by_run[known]
                common = times.keys() & reference.keys()
                if common:
                    ratio = float(np.median([reference[k] / times[k] for k in common]))
                    links.append((len(common), run, ratio * factor))
        if not links:
            break
        _, run, factor = max(links, key=lambda link: link[0])
        scale[run] = factor
        pending.discard(run)
    return scale


def ranked(frame: pd.DataFrame, l2: str = L2_COLD) -> pd.DataFrame:
    """The ok rows of L2 state `l2` with a finite positive time, one per (gpu, shape, dtype,
    configuration), in the order they are served: per group, the configurations timed as the
    tuner times (`DEFAULT_HOLD_US`) fastest first, then those timed otherwise (rows written
    before the hold, races), fastest first. A configuration timed both ways stands by its row
    timed so. Times taken with and without the hold differ by a few percent at the smallest
    shapes, so the two are never ranked against each other.

    "Fastest" is within a run: each run's times are scaled onto its group's reference run
    (`run_factors`) before they are compared, so drift between runs does not decide. A
    configuration measured by several runs stands by the newest of them (its fastest row
    there), not by its fastest row across them: the fastest of many noisy timings is biased
    low, and the configuration measured most often would win by that alone. So a run that
    measures a group's leaders again together (`tuner.run.leaders`) decides between them by
    its own head-to-head. A row keeps its measured `time_ms`."""
    ok = ok_rows(frame, l2)
    times = ok["time_ms"].to_numpy(dtype=float)
    with np.errstate(invalid="ignore"):
        ok = ok[np.isfinite(times) & (times > 0)]
    ok = ok.assign(_other_timing=other_timing(ok))
    if "run_id" in ok.columns and len(ok):
        ok = ok.assign(_scaled=ok["time_ms"] * run_factors(ok))
        ok = _newest_run_only(ok)
    else:
        ok = ok.assign(_scaled=ok["time_ms"])
    ok = ok.sort_values(["_other_timing", "_scaled", "timestamp"], kind="stable")
    ok = ok.drop_duplicates([*GROUP_COLUMNS, "config_key"], keep="first")
    return ok.drop(columns=["_other_timing", "_scaled"])


def _newest_run_only(ok: pd.DataFrame) -> pd.DataFrame:
    """Per (group, configuration, timing), the rows of the newest run that measured it (by its
    latest row there; rows without a timestamp count as oldest)."""
    keys = [*GROUP_COLUMNS, "config_key", "_other_timing"]
    stamps = ok.groupby([*keys, "run_id"], dropna=False)["timestamp"].transform("max")
    order = ok.assign(_run_stamp=stamps).sort_values(
        ["_run_stamp", "run_id"], ascending=False, na_position="last", kind="stable"
    )
    newest = order.groupby(keys, dropna=False, sort=False)["run_id"].transform("first")
    return order[order["run_id"] == newest].drop(columns=["_run_stamp"])


def winners(frame: pd.DataFrame, l2: str = L2_COLD) -> pd.DataFrame:
    """One row per (gpu, shape, dtype): the first configuration `ranked` serves, with
    `baseline_ms` and `speedup_vs_baseline` (NaN where the baseline was not measured)."""
    ok = ranked(frame, l2)
    if ok.empty:
        return ok.assign(baseline_ms=pd.Series(dtype=float), speedup_vs_baseline=pd.Series(dtype=float))
    best = ok.drop_duplicates(list(GROUP_COLUMNS), keep="first")
    best = best.merge(baseline_times(frame, l2), on=list(GROUP_COLUMNS), how="left")
    best["speedup_vs_baseline"] = best["baseline_ms"] / best["time_ms"]
    return best.sort_values(list(GROUP_COLUMNS)).reset_index(drop=True)
