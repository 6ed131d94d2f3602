"""How good are nearest-shape answers? Leave each tuned shape out, answer it from the others,
and compare the served configuration's recorded time there with the real optimum there.

Pure functions of the trial rows: no I/O, no server.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from results.index import StoreIndex, build_index
from results.selection import choose

COLUMNS = [
    "gpu",
    "B",
    "T",
    "NH",
    "NH_KV",
    "HD",
    "dtype",
    "served_from",
    "served_dtype",
    "tier",
    "distance",
    "served_config",
    "optimum_config",
    "optimum_ms",
    "served_ms",
    "slowdown",
]


@dataclass(frozen=True)
class Summary:
    shapes: int  # tuned (GPU, shape, dtype) groups
    answered: int  # groups the others could answer at all
    measured: int  # answers whose configuration was also measured at the held-out shape
    median_slowdown: float  # served time / optimum, over measured answers (1.0 = optimal)
    worst_slowdown: float
    within_5_percent: int


def leave_one_out(frame_or_index: pd.DataFrame | StoreIndex) -> pd.DataFrame:
    """One row per tuned group: what the other groups of its GPU would serve for it.

    `served_ms` is the served configuration's best correct time at the held-out shape
    (NaN if it was never measured there); `slowdown` = served_ms / optimum_ms."""
    index = frame_or_index if isinstance(frame_or_index, StoreIndex) else build_index(frame_or_index)
    rows = []
    for key, group in index.groups.items():
        choice = choose(index.groups_of(group.gpu), group.shape, group.dtype, exclude={key})
        optimum = group.best
        row = {
            "gpu": group.gpu,
            **group.shape.as_dict(),
            "dtype": group.dtype.name,
            "optimum_config": optimum.config_key,
            "optimum_ms": optimum.time_ms,
            "served_from": None,
            "served_dtype": None,
            "tier": None,
            "distance": math.nan,
            "served_config": None,
            "served_ms": math.nan,
            "slowdown": math.nan,
        }
        if choice is not None:
            served_ms = group.time_of(choice.candidate.config_key)
            row.update(
                served_from=str(choice.group.shape),
                served_dtype=choice.group.dtype.name,
                tier=choice.tier,
                distance=choice.distance,
                served_config=choice.candidate.config_key,
                served_ms=math.nan if served_ms is None else served_ms,
                slowdown=math.nan if served_ms is None else served_ms / optimum.time_ms,
            )
        rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)


def summarize(table: pd.DataFrame) -> Summary:
    measured = table["slowdown"].dropna()
    return Summary(
        shapes=len(table),
        answered=int(table["served_config"].notna().sum()),
        measured=len(measured),
        median_slowdown=float(measured.median()) if len(measured) else math.nan,
        worst_slowdown=float(measured.max()) if len(measured) else math.nan,
        within_5_percent=int((measured <= 1.05).sum()),
    )
