"""The dashboards' data: pure functions from trial rows (or the store index) to small
DataFrames and dicts. Drawing happens in draw.py, from what these return."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable

import numpy as np
import pandas as pd

import variants
from results.best import baseline_rows, timed_as_served, winners
from results.index import StoreIndex, shape_tuple
from results.leave_one_out import rule_quality
from results.peaks import PEAK_GBPS
from results.schema import GROUP_COLUMNS, L2_COLD, SHAPE_COLUMNS, Status, holds, l2_states
from results.selection import rank_groups, select
from variants import DType, Shape

OVERVIEW_COLUMNS = [
    *GROUP_COLUMNS,
    "shape",
    "short_shape",
    "bytes_moved",
    "family",
    "config_key",
    "time_ms",
    "gbps",
    "copy_ms",
    "ratio_to_copy",
    "copy_method",
    "empty_launch_ms",
    "baseline_ms",
    "speedup_vs_baseline",
    "trials",
    "source_hash",
    "source_current",
]
TEXT_COLUMNS = ("gpu", "dtype", "family", "status")


def shape_label(row: pd.Series | dict) -> str:
    return " ".join(f"{c}={int(row[c])}" for c in SHAPE_COLUMNS)


def short_shape(row: pd.Series | dict) -> str:
    """'8×1024 32/8/128': B×T, then NH/NH_KV/HD."""
    return f"{int(row['B'])}×{int(row['T'])} {int(row['NH'])}/{int(row['NH_KV'])}/{int(row['HD'])}"


def row_shape(row: pd.Series | dict) -> Shape:
    return Shape(*(int(row[c]) for c in SHAPE_COLUMNS))


def usable(frame: pd.DataFrame, l2: str = L2_COLD) -> pd.DataFrame:
    """The rows the dashboards can place: timed in L2 state `l2` (cold by default: rows tuned
    with `--l2 fed` rank apart, and only the overview's fed table reads them), a GPU label, a
    known dtype, a family and a status (non-empty strings) and a valid shape. Other rows are
    dropped, never a reason to fail; the shape columns come back as int64."""
    missing = [c for c in (*TEXT_COLUMNS, *SHAPE_COLUMNS) if c not in frame.columns]
    if missing or frame.empty:
        return frame.iloc[0:0] if missing else frame
    keep = (l2_states(frame) == l2).to_numpy(dtype=bool, copy=True)
    for column in TEXT_COLUMNS:
        keep &= _non_empty_text(frame[column])
    keep &= frame["dtype"].isin(list(variants.DTYPES)).to_numpy(dtype=bool, na_value=False)
    dims = {c: pd.to_numeric(frame[c], errors="coerce") for c in SHAPE_COLUMNS}
    for values in dims.values():
        keep &= (values.notna() & (values >= 1) & (values == values.round())).to_numpy(
            dtype=bool, na_value=False
        )
    divides = dims["NH"] % dims["NH_KV"].where(dims["NH_KV"] >= 1) == 0
    keep &= divides.to_numpy(dtype=bool, na_value=False)
    if keep.all() and all(frame[c].dtype == np.int64 for c in SHAPE_COLUMNS):
        return frame
    rows = frame[keep].copy()
    for column in SHAPE_COLUMNS:
        rows[column] = dims[column][keep].astype(np.int64)
    return rows


def _non_empty_text(values: pd.Series) -> np.ndarray:
    if isinstance(values.dtype, pd.StringDtype):  # as loaded from parquet: only nulls to find
        return (values.notna() & (values.str.len() > 0)).to_numpy(dtype=bool, na_value=False)
    return values.map(lambda v: isinstance(v, str) and v != "").to_numpy(dtype=bool, na_value=False)


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


def _bytes_moved(row: pd.Series | dict) -> int:
    return row_shape(row).bytes_moved(variants.get_dtype(row["dtype"]))


def _current_source_hash(family: object) -> str | None:
    found = variants.FAMILIES.get(family) if isinstance(family, str) else None
    return found.source_hash if found is not None else None


def overview(frame: pd.DataFrame, l2: str = L2_COLD) -> pd.DataFrame:
    """One row per GPU x shape x dtype: the winner, its time, GB/s, fraction of the copy,
    speed-up over llm.c's kernel1 at block 128, the number of trials, and `source_hash`: the
    family's current source (what /kernels serves; `source_current` says whether the time
    was measured with it). Sorted by GPU, then shape (smallest first), then dtype. Of the
    rows timed in L2 state `l2`."""
    frame = usable(frame, l2)
    best = winners(frame, l2)
    if best.empty:
        return pd.DataFrame(columns=OVERVIEW_COLUMNS)
    counts = frame.groupby(list(GROUP_COLUMNS)).size().rename("trials").reset_index()
    best = best.merge(counts, on=list(GROUP_COLUMNS), how="left")
    best["shape"] = best.apply(shape_label, axis=1)
    best["short_shape"] = best.apply(short_shape, axis=1)
    best["bytes_moved"] = best.apply(_bytes_moved, axis=1).astype(np.int64)
    best["gbps"] = best["bytes_moved"] / (best["time_ms"] * 1e6)
    for column in ("copy_ms", "empty_launch_ms", "copy_method"):
        if column not in best:
            best[column] = np.nan
    measured = best["source_hash"] if "source_hash" in best else pd.Series(None, best.index, dtype=object)
    best["source_hash"] = best["family"].map(_current_source_hash)
    best["source_current"] = measured.isna() | (measured == best["source_hash"])
    best = _in_shape_order(best)
    return best[OVERVIEW_COLUMNS].reset_index(drop=True)


def _in_shape_order(table: pd.DataFrame) -> pd.DataFrame:
    """GPU, then shapes by elements moved (smallest first), then dtype in DTYPES order."""
    dtype_order = {name: i for i, name in enumerate(variants.DTYPES)}
    elements = table["B"] * table["T"] * (table["NH"] * 4 + 2 * table["NH_KV"]) * table["HD"]
    keys = table.assign(_elements=elements, _dtype=table["dtype"].map(dtype_order))
    keys = keys.sort_values(["gpu", "_elements", *SHAPE_COLUMNS, "_dtype"], kind="stable")
    return keys.drop(columns=["_elements", "_dtype"])


def _of_gpu(frame: pd.DataFrame, gpu: str) -> pd.DataFrame:
    if "gpu" not in frame:
        return frame.iloc[0:0]
    return frame[(frame["gpu"] == gpu).to_numpy(dtype=bool, na_value=False)]


def _select_shape(frame: pd.DataFrame, shape: Shape, dtype: str | None = None) -> pd.DataFrame:
    mask = pd.Series(True, index=frame.index) if dtype is None else frame["dtype"] == dtype
    for column in SHAPE_COLUMNS:
        mask &= frame[column] == getattr(shape, column)
    return frame[mask.to_numpy(dtype=bool, na_value=False)]


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


def shape_trials(frame: pd.DataFrame, gpu: str, shape: Shape, dtype: str) -> pd.DataFrame:
    """Every trial of one GPU, shape and dtype, with `block_size`, `variant`, `series` (one
    search, see `search_series`), `trial_number` (the sampler's trial number, else the order of
    timestamps in its search) and `measured` (1, 2, 3... : the configurations that search
    measured, in the order it measured them; a sampler's pruned trials leave no row)."""
    rows = usable(_select_shape(_of_gpu(frame, gpu), shape, dtype)).copy()
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


def _ok(trials: pd.DataFrame) -> pd.DataFrame:
    times = pd.to_numeric(trials["time_ms"], errors="coerce")
    return trials[((trials["status"] == Status.OK) & np.isfinite(times)).to_numpy(dtype=bool, na_value=False)]


def heatmap(trials: pd.DataFrame) -> pd.DataFrame:
    """Variant x block size: the best correct time (ms) of the rows timed as the group's
    ranking leads with (`timed_as_served`). Rows fastest first; NaN = not measured."""
    ok = _ok(timed_as_served(trials)).dropna(subset=["block_size"])
    if ok.empty:
        return pd.DataFrame()
    ok = ok.assign(time_ms=pd.to_numeric(ok["time_ms"], errors="coerce"))
    table = ok.pivot_table(index="variant", columns="block_size", values="time_ms", aggfunc="min")
    table = table.reindex(sorted(table.columns), axis=1)
    return table.loc[table.min(axis=1).sort_values(kind="stable").index]


def heatmap_winner(table: pd.DataFrame) -> dict | None:
    """The fastest cell of a heat map: {'variant', 'block_size', 'time_ms'}, or None if empty."""
    if table.empty or table.isna().all().all():
        return None
    values = table.to_numpy(dtype=float)
    row, column = np.unravel_index(np.nanargmin(values), values.shape)
    return {
        "variant": table.index[row],
        "block_size": int(table.columns[column]),
        "time_ms": float(values[row, column]),
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
    base = pd.to_numeric(baseline_rows(_ok(rows))["time_ms"], errors="coerce").dropna()
    copy = pd.to_numeric(rows.get("copy_ms", pd.Series(dtype=float)), errors="coerce").dropna()
    copy = copy[np.isfinite(copy) & (copy > 0)]
    return {
        "baseline_ms": float(base.median()) if len(base) else None,
        "copy_ms": float(copy.median()) if len(copy) else None,
    }


def gpu_comparison(frame: pd.DataFrame, shape: Shape, dtype: str) -> pd.DataFrame:
    """The same shape and dtype on every GPU: the winner of each, side by side."""
    table = overview(frame)
    return _select_shape(table, shape, dtype).sort_values("gpu").reset_index(drop=True)


def family_best(frame: pd.DataFrame, shape: Shape, dtype: str) -> pd.DataFrame:
    """GPU x family: the best correct time, its fraction of the copy, and `ratio_to_best`:
    over the best of any family on that GPU (1.0 = the winning family)."""
    columns = ["gpu", "family", "time_ms", "ratio_to_copy", "ratio_to_best"]
    ok = _ok(timed_as_served(_select_shape(usable(frame), shape, dtype)))
    if ok.empty:
        return pd.DataFrame(columns=columns)
    ok = ok.assign(time_ms=pd.to_numeric(ok["time_ms"], errors="coerce"))
    best = ok.sort_values("time_ms", kind="stable").drop_duplicates(["gpu", "family"])
    best = best.assign(ratio_to_best=best["time_ms"] / best.groupby("gpu")["time_ms"].transform("min"))
    return best[columns].sort_values(["gpu", "family"]).reset_index(drop=True)


FAMILY_COLUMNS = [*GROUP_COLUMNS, "short_shape", "family", "time_ms", "best_ms", "ratio_to_best"]


def family_vs_best(frame: pd.DataFrame, gpu: str | None = None) -> pd.DataFrame:
    """Family against family across shapes: per GPU, shape and dtype, each family's best
    correct time over the best of any family there (1.0 = this family wins). Shapes in the
    overview's order, families in the registry's."""
    ok = _ok(timed_as_served(usable(frame if gpu is None else _of_gpu(frame, gpu))))
    if ok.empty:
        return pd.DataFrame(columns=FAMILY_COLUMNS)
    ok = ok.assign(time_ms=pd.to_numeric(ok["time_ms"], errors="coerce"))
    keys = [*GROUP_COLUMNS, "family"]
    table = ok.groupby(keys, as_index=False)["time_ms"].min()
    table["best_ms"] = table.groupby(list(GROUP_COLUMNS))["time_ms"].transform("min")
    table["ratio_to_best"] = table["time_ms"] / table["best_ms"]
    table["short_shape"] = table.apply(short_shape, axis=1) if len(table) else ""
    family_order = {name: i for i, name in enumerate(variants.FAMILIES)}
    rank = table["family"].map(family_order).fillna(len(family_order))
    table = _in_shape_order(table.assign(_family=rank).sort_values(["_family", "family"], kind="stable"))
    return table[FAMILY_COLUMNS].reset_index(drop=True)


def gpu_names(frame: pd.DataFrame, gpu: str) -> list[str]:
    """The device names rows of this GPU label report."""
    if "gpu_name" not in frame or frame.empty:
        return []
    names = _of_gpu(frame, gpu)["gpu_name"]
    return sorted({n for n in names.dropna().unique() if isinstance(n, str) and n})


def peak_bandwidth(names: Iterable[str]) -> tuple[str, float] | None:
    """(device name, peak GB/s) when every name is one of PEAK_GBPS and all share one peak."""
    names = list(names)
    peaks = {PEAK_GBPS.get(name) for name in names}
    if not names or None in peaks or len(peaks) != 1:
        return None
    return names[0], float(peaks.pop())


BANDWIDTH_COLUMNS = [
    *GROUP_COLUMNS,
    "short_shape",
    "bytes_moved",
    "config_key",
    "time_ms",
    "gbps",
    "copy_ms",
    "copy_gbps",
    "ratio_to_copy",
    "ratio_to_empty_launch",
    "baseline_ms",
    "baseline_gbps",
    "source_hash",
]


def bandwidth(frame: pd.DataFrame, gpu: str) -> pd.DataFrame:
    """Where each tuned shape of one GPU stands against the memory system: per shape and
    dtype, bytes moved (every dout read once, every dinp written once), the winner's achieved
    GB/s, the same-process device copy's, and llm.c's baseline's. Smallest shapes first."""
    table = overview(_of_gpu(frame, gpu))
    if table.empty:
        return pd.DataFrame(columns=BANDWIDTH_COLUMNS)
    table = table.copy()
    copy_ms = pd.to_numeric(table["copy_ms"], errors="coerce").where(lambda c: c > 0)
    table["copy_gbps"] = table["bytes_moved"] / (copy_ms * 1e6)
    table["baseline_gbps"] = table["bytes_moved"] / (pd.to_numeric(table["baseline_ms"]) * 1e6)
    empty_ms = pd.to_numeric(table["empty_launch_ms"], errors="coerce").where(lambda c: c > 0)
    table["ratio_to_empty_launch"] = table["time_ms"] / empty_ms
    return table[BANDWIDTH_COLUMNS].reset_index(drop=True)


def default_gpu(index: StoreIndex, shape: Shape | None = None, dtype: DType | None = None) -> str | None:
    """The GPU a page shows when the request names none: the only GPU with results, else the
    only one that tuned this shape and dtype; None when the choice is the reader's."""
    gpus = index.available_gpus()
    if len(gpus) == 1:
        return gpus[0]
    if shape is not None and dtype is not None:
        tuned = [g for g in gpus if (g, shape_tuple(shape), dtype.name) in index.groups]
        if len(tuned) == 1:
            return tuned[0]
    return None


def tuned_shapes(index: StoreIndex, gpu: str | None = None) -> list[Shape]:
    """The shapes tuned (in any dtype) on one GPU, or on any, smallest first."""
    shapes = {group.shape for group in index.groups.values() if gpu is None or group.gpu == gpu}
    return sorted(shapes, key=lambda s: (s.bytes_moved(variants.get_dtype("fp32")), shape_tuple(s)))


def served_instead(index: StoreIndex, gpu: str, shape: Shape, dtype: DType) -> dict | None:
    """What GET /best would serve on `gpu` for a shape and dtype (results.selection's rule):
    the tuned shape it comes from, its distance and tier, the configuration with its launch
    geometry for the requested shape, what it measured at the tuned shape, and how answers of
    that tier have done (`rule_quality`, leave-one-out on the measuring GPU's results, as /best
    gives it). None when nothing of that GPU can serve."""
    choice = select(index, gpu, shape, dtype)
    if choice is None:
        return None
    group, candidate, recipe = choice.group, choice.candidate, choice.recipe
    return {
        "gpu": gpu,
        "measured_gpu": group.gpu,
        "match": choice.match,
        "tuned_shape": group.shape,
        "tuned_dtype": group.dtype.name,
        "tier": choice.tier,
        "distance": float(choice.distance),
        "rank": choice.rank,
        "family": recipe.family,
        "config_key": recipe.config_key,
        "grid": recipe.grid,
        "block": recipe.block,
        "source_hash": recipe.source_hash,
        "time_ms": candidate.time_ms,
        "gbps": candidate.gbps,
        "ratio_to_copy": candidate.ratio_to_copy,
        "tuned_winner": group.best.config_key,
        "rule_quality": rule_quality(index, group.gpu).at(choice.tier),
    }


NEAREST_COLUMNS = [
    "B",
    "T",
    "NH",
    "NH_KV",
    "HD",
    "dtype",
    "tier",
    "distance",
    "config_key",
    "time_ms",
    "serves",
]


def nearest_tuned(index: StoreIndex, gpu: str, shape: Shape, dtype: DType, count: int = 5) -> pd.DataFrame:
    """The tuned shapes of `gpu` nearest to (shape, dtype) in the order the selection rule
    tries them, each with its winner; `serves` marks the one GET /best answers from."""
    served = select(index, gpu, shape, dtype)
    rows = []
    for tier, dist, group in rank_groups(index.groups_of(gpu), shape, dtype)[:count]:
        rows.append(
            {
                **group.shape.as_dict(),
                "dtype": group.dtype.name,
                "tier": tier,
                "distance": float(dist),
                "config_key": group.best.config_key,
                "time_ms": group.best.time_ms,
                "serves": served is not None and served.group.key == group.key,
            }
        )
    return pd.DataFrame(rows, columns=NEAREST_COLUMNS)
