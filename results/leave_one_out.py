"""How good are nearest-shape answers? Leave each tuned shape out, answer it from the others,
and compare the served configuration's recorded time there with the real optimum there.

`rule_quality` sums that up per GPU and tier (the tier the left-out shape was answered
from), which GET /best shows beside every nearest answer. Pure functions of the trial rows
(and a cache on the index): no I/O, no server.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from results.index import GroupKey, StoreIndex, TunedGroup, build_index
from results.schema import SHAPE_COLUMNS
from results.selection import Choice, choose

COLUMNS = [
    "gpu",
    *SHAPE_COLUMNS,
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
    (NaN if it was never measured there); `slowdown` = served_ms / optimum_ms. A partial group
    (one family searched, `TunedGroup.partial`) answers others but is no target: its best is
    no optimum, so a slow-down against it would read low."""
    index = frame_or_index if isinstance(frame_or_index, StoreIndex) else build_index(frame_or_index)
    rows = []
    for key, group in _targets(index):
        choice = choose(index.groups_of(group.gpu), group.shape, group.dtype, exclude={key})
        rows.append(_row(group, choice))
    return pd.DataFrame(rows, columns=COLUMNS)


def _targets(index: StoreIndex) -> list[tuple[GroupKey, TunedGroup]]:
    """The groups a leave-out judges: every one but the partial ones."""
    return [(key, group) for key, group in index.groups.items() if not group.partial]


def _row(group: TunedGroup, choice: Choice | None) -> dict:
    """A held-out group's row: its optimum, and the served configuration's time there."""
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
    return row


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


TIERS = (0, 1, 2)  # results.selection's: same dtype and layout, same dtype, another dtype
RULE_PERCENTILE = 90


@dataclass(frozen=True)
class TierQuality:
    """Leave-one-out at one tier of one GPU: the tuned (shape, dtype) groups that, left out,
    were answered from this tier, and the slow-down of what they were served."""

    tier: int
    held_out: int  # groups answered from this tier
    judged: int  # of those, the ones that measured the served configuration themselves
    median_slowdown: float | None  # served time / the group's own best, over judged groups
    p90_slowdown: float | None  # 90th percentile (linear between order statistics)
    worst_slowdown: float | None
    reason: str | None  # why the slow-downs are None (no group judged at this tier)

    @property
    def not_judged(self) -> int:
        """Groups served a configuration they never measured: no slow-down is known."""
        return self.held_out - self.judged


@dataclass(frozen=True)
class RuleQuality:
    """The leave-one-out evaluation of one GPU's results, per tier."""

    gpu: str
    tuned: int  # tuned (shape, dtype) groups
    unanswered: int  # groups that none of the others could serve
    tiers: tuple[TierQuality, ...]  # one per tier of TIERS, in order

    def at(self, tier: int) -> TierQuality:
        return self.tiers[TIERS.index(tier)]


def no_figures_reason(gpu: str, tier: int, held_out: int, tuned: int) -> str:
    """Why a tier of a GPU has no slow-down figures."""
    if tuned == 0:
        return f"{gpu} has no tuned (shape, dtype)"
    if tuned == 1:
        return f"{gpu} has one tuned (shape, dtype): left out, nothing remains to answer it"
    if held_out == 0:
        return f"none of the {tuned} tuned (shape, dtype) of {gpu}, left out, was answered from tier {tier}"
    return (
        f"the {held_out} tuned (shape, dtype) of {gpu} answered from tier {tier} when left out "
        "never measured the configuration served to them"
    )


def tier_quality(gpu: str, gpu_table: pd.DataFrame, tier: int) -> TierQuality:
    """Tier `tier`'s figures from the leave-one-out rows of one GPU."""
    rows = gpu_table[(gpu_table["served_config"].notna()) & (gpu_table["tier"] == tier)]
    slowdowns = rows["slowdown"].dropna().to_numpy(dtype=float)
    if len(slowdowns) == 0:
        reason = no_figures_reason(gpu, tier, len(rows), len(gpu_table))
        return TierQuality(tier, len(rows), 0, None, None, None, reason)
    return TierQuality(
        tier=tier,
        held_out=len(rows),
        judged=len(slowdowns),
        median_slowdown=float(np.median(slowdowns)),
        p90_slowdown=float(np.percentile(slowdowns, RULE_PERCENTILE)),
        worst_slowdown=float(slowdowns.max()),
        reason=None,
    )


def rule_quality_of(table: pd.DataFrame, gpu: str) -> RuleQuality:
    """One GPU's figures per tier from a `leave_one_out` table (of that GPU or of several)."""
    gpu_table = table[table["gpu"] == gpu]
    return RuleQuality(
        gpu=gpu,
        tuned=len(gpu_table),
        unanswered=int(gpu_table["served_config"].isna().sum()),
        tiers=tuple(tier_quality(gpu, gpu_table, tier) for tier in TIERS),
    )


def rule_quality_by_gpu(index: StoreIndex) -> Mapping[str, RuleQuality]:
    """Every GPU's figures per tier. Computed for the whole index on first use and cached on
    it (an index never changes; the live store computes them as it loads)."""
    if not index.rule_quality and index.by_gpu:
        table = leave_one_out(index)
        index.rule_quality.update({gpu: rule_quality_of(table, gpu) for gpu in index.by_gpu})
    return index.rule_quality


def rule_quality(index: StoreIndex, gpu: str) -> RuleQuality:
    """How the nearest-shape rule has done on `gpu`'s own results, per tier."""
    found = rule_quality_by_gpu(index).get(gpu)
    return found if found is not None else rule_quality_of(pd.DataFrame(columns=COLUMNS), gpu)


def leave_layout_out(frame_or_index: pd.DataFrame | StoreIndex) -> pd.DataFrame:
    """One row per tuned group, answered with every group of its head layout (NH, NH_KV, HD,
    all dtypes) left out: what a layout nobody tuned would be served (`results.layout_rule`
    first). Columns as `leave_one_out`'s; `slowdown` is NaN where the group never measured
    the configuration it would be served."""
    index = frame_or_index if isinstance(frame_or_index, StoreIndex) else build_index(frame_or_index)
    rows = []
    for _, group in _targets(index):
        layout = group.shape.layout
        same_layout = {g.key for g in index.groups_of(group.gpu) if layout == g.shape.layout}
        choice = choose(index.groups_of(group.gpu), group.shape, group.dtype, exclude=same_layout)
        rows.append(_row(group, choice))
    return pd.DataFrame(rows, columns=COLUMNS)
