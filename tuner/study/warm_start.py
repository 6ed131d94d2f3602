"""A new shape's study starts from what the store knows: the winners and runners-up of the
nearest tuned shapes of the same GPU (the serving rule's order, `results.selection`), queued
first with Optuna's `enqueue_trial`; the sampler goes on from there.

The group being tuned is left out where its own rows answer without measuring; where they were
timed with another hold, its own leaders are queued first, to be measured again (rows of two
holds never rank together, `results.best.ranked`). `replay-eval --warm-start` leaves out every
dtype of the held-out shape, so the figures it reports are those of a shape the store never saw.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Collection, Iterable

import optuna
import pandas as pd
from optuna.trial import TrialState

from results.index import GroupKey, StoreIndex, TunedGroup, build_index
from results.schema import L2_COLD, hold_or_zero
from results.selection import nearest_choices
from tuner.cli.defaults import WARM_START_SIZE
from tuner.study.plan import StudyPlan
from tuner.study.space import SearchSpace
from variants import Config, DType, Shape

WARM_START_PER_SHAPE = 2  # at most this many from one tuned shape


def warm_start_configs(
    groups: Iterable[TunedGroup],
    shape: Shape,
    dtype: DType,
    size: int = WARM_START_SIZE,
    per_shape: int = WARM_START_PER_SHAPE,
    exclude: Collection[GroupKey] = (),
    hold_us: float | None = None,
) -> list[Config]:
    """The configurations to queue first for (shape, dtype), from one GPU's tuned `groups`:
    valid there, distinct. The group of (shape, dtype) itself is left out where its rows
    answer; where they were timed with another hold than the run's (`hold_us`), they answer
    nothing, and its own leaders (up to `size`) are measured again first."""
    if size <= 0:
        return []
    own = [g for g in groups if g.shape == shape and g.dtype.name == dtype.name and g.key not in exclude]
    own_keys = {g.key for g in own}
    usable = [g for g in groups if g.key not in own_keys]
    again = []
    if hold_us is not None:
        hold = hold_or_zero(hold_us)
        leaders = [c for g in own for c in g.candidates[:size]]
        again = [c.config for c in leaders if c.hold_us != hold]
    nearest = nearest_choices(usable, shape, dtype, size, per_shape, exclude)
    found = list(dict.fromkeys([*again, *(c.candidate.config for c in nearest)]))
    return found[:size]


def shape_held_out(index: StoreIndex, gpu: str, shape: Shape) -> set[GroupKey]:
    """Every tuned group of `shape` on `gpu`, whatever its dtype."""
    return {g.key for g in index.groups_of(gpu) if g.shape == shape}


def enqueue(study: optuna.Study, space: SearchSpace, configs: Iterable[Config]) -> int:
    """Queue configs in order, skipping those already queued or running. Returns how many."""
    pending = {
        json.dumps(t.system_attrs.get("fixed_params", t.params), sort_keys=True)
        for t in study.get_trials(deepcopy=False, states=(TrialState.WAITING, TrialState.RUNNING))
    }
    queued = 0
    for config in configs:
        params = space.params_of(config)
        if json.dumps(params, sort_keys=True) not in pending:
            study.enqueue_trial(params)
            pending.add(json.dumps(params, sort_keys=True))
            queued += 1
    return queued


def with_warm_start(
    plan: StudyPlan,
    indexes: Iterable[StoreIndex | None],
    size: int,
    hold_us: float | None = None,
    l2: str | None = None,
) -> StudyPlan:
    """`plan` with the warm start that the tuned groups of its GPU in `indexes` give it, for a
    run that times with `hold_us` in L2 state `l2` (None: however the store did). A run in
    another state than cold measures again, in its own state, the leaders of its own shape and
    dtype tuned cold (half of `size` first, the rest after the nearest tuned in its state)."""
    state = l2 or L2_COLD
    found = [index for index in indexes if index is not None]
    again: list[Config] = []
    if state != L2_COLD:
        own = [
            g for i in found for g in i.groups_of(plan.gpu) if (g.shape, g.dtype) == (plan.shape, plan.dtype)
        ]
        again = [c.config for g in own for c in g.candidates[:size]]
    groups = [g for index in found for g in index.in_state(state).groups_of(plan.gpu)]
    nearest = warm_start_configs(groups, plan.shape, plan.dtype, size, hold_us=hold_us)
    half = max(1, size // 2)
    configs = list(dict.fromkeys([*again[:half], *nearest, *again[half:]]))[:size]
    return dataclasses.replace(plan, warm_start=tuple(configs)) if configs else plan


def index_of(frame: pd.DataFrame | None) -> StoreIndex | None:
    return None if frame is None or frame.empty else build_index(frame)
