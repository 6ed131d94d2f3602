"""The overview's tables (one winner per GPU, shape and dtype; families against each other),
the same shape on every GPU, and where each winner stands against the memory system."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

import variants
from results.best import timed_as_served, winners
from results.peaks import PEAK_GBPS
from results.schema import GROUP_COLUMNS, L2_COLD, ops_of, with_op
from variants import Shape

from .rows import (
    bytes_moved,
    family_order,
    gpu_order,
    in_shape_order,
    of_gpu,
    of_op,
    ok_rows,
    select_shape,
    shape_label,
    short_shape,
    usable,
)

OVERVIEW_COLUMNS = [
    *GROUP_COLUMNS,
    "shape",
    "short_shape",
    "bytes_moved",
    "family",
    "config_key",
    "time_ms",
    "gbps",
    "peak_gbps",
    "pct_of_peak",
    "copy_ms",
    "ratio_to_copy",
    "copy_method",
    "empty_launch_ms",
    "baseline_ms",
    "speedup_vs_baseline",
    "trials",
    "source_hash",
    "source_current",
    "gpu_order",
]


def _current_source_hash(op: object, family: object) -> str | None:
    """The current source of `family` of `op` (family names repeat across ops)."""
    descriptor = variants.OPS.get(op) if isinstance(op, str) else None
    found = descriptor.families.get(family) if descriptor is not None and isinstance(family, str) else None
    return found.source_hash if found is not None else None


def gpu_names(frame: pd.DataFrame, gpu: str) -> list[str]:
    """The device names rows of this GPU label report."""
    if "gpu_name" not in frame or frame.empty:
        return []
    names = of_gpu(frame, gpu)["gpu_name"]
    return sorted({n for n in names.dropna().unique() if isinstance(n, str) and n})


def peak_bandwidth(names: Iterable[str]) -> tuple[str, float] | None:
    """(device name, peak GB/s) when every name is one of PEAK_GBPS and all share one peak."""
    names = list(names)
    peaks = {PEAK_GBPS.get(name) for name in names}
    if not names or None in peaks or len(peaks) != 1:
        return None
    return names[0], float(peaks.pop())


def gpu_peaks(frame: pd.DataFrame) -> dict[str, float]:
    """Peak GB/s of every GPU label whose rows all report one known device (peak_bandwidth)."""
    if "gpu" not in frame or frame.empty:
        return {}
    peaks = {}
    for gpu in frame["gpu"].dropna().unique():
        found = peak_bandwidth(gpu_names(frame, str(gpu)))
        if found is not None:
            peaks[str(gpu)] = found[1]
    return peaks


def overview(
    frame: pd.DataFrame, l2: str = L2_COLD, gpu: str | None = None, op: str | None = variants.DEFAULT_OP
) -> pd.DataFrame:
    """One row per GPU x shape x dtype (of one GPU, with `gpu`): the winner, its time, GB/s,
    percent of the GPU's peak DRAM bandwidth (`pct_of_peak`, NaN where the peak is unknown),
    fraction of the copy, speed-up over llm.c's kernel1 at block 128, the number of trials,
    `source_hash`: the family's current source (what /kernels serves; `source_current` says
    whether the time was measured with it), and `gpu_order`: the GPU's place among every GPU
    of `frame` (rows.gpu_order, over every op's rows: a GPU keeps its colour from op to op).
    Sorted by GPU, then shape (smallest first), then dtype. Of the rows of op `op` (every op's
    with None, each its own row) timed in L2 state `l2`."""
    order, peaks = gpu_order(frame), gpu_peaks(frame)
    frame = with_op(usable(of_op(frame if gpu is None else of_gpu(frame, gpu), op), l2))
    best = winners(frame, l2)
    if best.empty:
        return pd.DataFrame(columns=OVERVIEW_COLUMNS)
    counts = frame.groupby(list(GROUP_COLUMNS)).size().rename("trials").reset_index()
    best = best.merge(counts, on=list(GROUP_COLUMNS), how="left")
    best["shape"] = best.apply(shape_label, axis=1)
    best["short_shape"] = best.apply(short_shape, axis=1)
    best["bytes_moved"] = best.apply(bytes_moved, axis=1).astype(np.int64)
    best["gbps"] = best["bytes_moved"] / (best["time_ms"] * 1e6)
    best["peak_gbps"] = best["gpu"].map(peaks).astype(float)
    best["pct_of_peak"] = 100 * best["gbps"] / best["peak_gbps"]
    for column in ("copy_ms", "empty_launch_ms", "copy_method"):
        if column not in best:
            best[column] = np.nan
    measured = best["source_hash"] if "source_hash" in best else pd.Series(None, best.index, dtype=object)
    best["source_hash"] = [
        _current_source_hash(o, f) for o, f in zip(best["op"], best["family"], strict=True)
    ]
    best["source_current"] = measured.isna() | (measured == best["source_hash"])
    best["gpu_order"] = best["gpu"].map(order).astype(np.int64)
    best = in_shape_order(best)
    return best[OVERVIEW_COLUMNS].reset_index(drop=True)


def gpu_comparison(
    frame: pd.DataFrame, shape: Shape, dtype: str, op: str | None = variants.DEFAULT_OP
) -> pd.DataFrame:
    """The same shape and dtype on every GPU: the winner of each, side by side, in GPU order."""
    table = overview(frame, op=op)
    return select_shape(table, shape, dtype).sort_values("gpu_order").reset_index(drop=True)


def family_best(
    frame: pd.DataFrame, shape: Shape, dtype: str, op: str | None = variants.DEFAULT_OP
) -> pd.DataFrame:
    """GPU x family: the best correct time, its fraction of the copy, and `ratio_to_best`: over
    the best of any family on that GPU (1.0 = the winning family); `gpu_order` as in `overview`."""
    columns = ["gpu", "family", "time_ms", "ratio_to_copy", "ratio_to_best", "gpu_order"]
    order = gpu_order(frame)
    ok = ok_rows(timed_as_served(select_shape(usable(of_op(frame, op)), shape, dtype)))
    if ok.empty:
        return pd.DataFrame(columns=columns)
    ok = ok.assign(time_ms=pd.to_numeric(ok["time_ms"], errors="coerce"))
    best = ok.sort_values("time_ms", kind="stable").drop_duplicates(["gpu", "family"])
    best = best.assign(
        ratio_to_best=best["time_ms"] / best.groupby("gpu")["time_ms"].transform("min"),
        gpu_order=best["gpu"].map(order).astype(np.int64),
    )
    return best[columns].sort_values(["gpu_order", "family"]).reset_index(drop=True)


FAMILY_COLUMNS = [*GROUP_COLUMNS, "short_shape", "family", "time_ms", "best_ms", "ratio_to_best", "gpu_order"]


def family_vs_best(
    frame: pd.DataFrame, gpu: str | None = None, op: str | None = variants.DEFAULT_OP
) -> pd.DataFrame:
    """Family against family across shapes: per GPU, shape and dtype, each family's best
    correct time over the best of any family there (1.0 = this family wins). Shapes in the
    overview's order, families in the registry's."""
    order = gpu_order(frame)
    ok = ok_rows(timed_as_served(usable(of_op(frame if gpu is None else of_gpu(frame, gpu), op))))
    if ok.empty:
        return pd.DataFrame(columns=FAMILY_COLUMNS)
    ok = ok.assign(time_ms=pd.to_numeric(ok["time_ms"], errors="coerce"), op=ops_of(ok))
    keys = [*GROUP_COLUMNS, "family"]
    table = ok.groupby(keys, as_index=False)["time_ms"].min()
    table["best_ms"] = table.groupby(list(GROUP_COLUMNS))["time_ms"].transform("min")
    table["ratio_to_best"] = table["time_ms"] / table["best_ms"]
    table["short_shape"] = table.apply(short_shape, axis=1) if len(table) else ""
    table["gpu_order"] = table["gpu"].map(order).astype(np.int64)
    families = family_order()
    rank = table["family"].map(families).fillna(len(families))
    table = in_shape_order(table.assign(_family=rank).sort_values(["_family", "family"], kind="stable"))
    return table[FAMILY_COLUMNS].reset_index(drop=True)


BANDWIDTH_COLUMNS = [
    *GROUP_COLUMNS,
    "short_shape",
    "bytes_moved",
    "config_key",
    "time_ms",
    "gbps",
    "pct_of_peak",
    "copy_ms",
    "copy_gbps",
    "ratio_to_copy",
    "ratio_to_empty_launch",
    "baseline_ms",
    "baseline_gbps",
    "source_hash",
    "gpu_order",
]


def bandwidth(frame: pd.DataFrame, gpu: str, op: str | None = variants.DEFAULT_OP) -> pd.DataFrame:
    """Where each tuned shape of one GPU stands against the memory system: per shape and
    dtype, bytes moved (every input read once, the output written once), the winner's achieved
    GB/s (and percent of the GPU's peak), the same-process device copy's, and llm.c's
    baseline's. Smallest shapes first."""
    table = overview(frame, gpu=gpu, op=op)
    if table.empty:
        return pd.DataFrame(columns=BANDWIDTH_COLUMNS)
    table = table.copy()
    copy_ms = pd.to_numeric(table["copy_ms"], errors="coerce").where(lambda c: c > 0)
    table["copy_gbps"] = table["bytes_moved"] / (copy_ms * 1e6)
    table["baseline_gbps"] = table["bytes_moved"] / (pd.to_numeric(table["baseline_ms"]) * 1e6)
    empty_ms = pd.to_numeric(table["empty_launch_ms"], errors="coerce").where(lambda c: c > 0)
    table["ratio_to_empty_launch"] = table["time_ms"] / empty_ms
    return table[BANDWIDTH_COLUMNS].reset_index(drop=True)


def shape_page(table: pd.DataFrame, page: int, per_page: int) -> tuple[pd.DataFrame, int, int]:
    """The rows of the page-th run of `per_page` shapes of an `overview` table (in its order,
    pages from 1), the number of pages and the number of shapes. A page past the last is empty."""
    shapes = list(dict.fromkeys(table["shape"]))
    pages = max(1, -(-len(shapes) // per_page))
    picked = set(shapes[(page - 1) * per_page : page * per_page])
    return table[table["shape"].isin(picked)], pages, len(shapes)
