"""A run that measured something new for a group also measures again the group's leaders from
other runs, in a study of its own, so that its times and theirs meet in one process.

`results.best.run_factors` ranks within runs: it puts a run's times on the scale of another run
through the configurations both measured. A study answers a configuration the store already
holds instead of measuring it (`tuner.study.claims`), so a later run of a group shares nothing
with the earlier ones, and its new configurations would then stand against theirs by absolute
time, across the few per cent that the GPU drifts between runs. Measuring the group's
`LEADERS_AGAIN` leaders of other runs once more (the fastest configuration of each of its fastest
families, so that the families that contend for the group meet in one process), after the run's
own study, links the run to theirs, where it measured none of their configurations (else it is
linked already).
The follow-up study (`<study>/leaders/<run id>`) answers nothing from the store and measures
exactly those configurations, each once, with this run's id.

Leaders come from other studies only: the workers of a fleet share one study (and measure each
configuration once between them), each with a run of its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping

import numpy as np
import pandas as pd

from results.best import ranked
from results.index import parse_config
from results.schema import L2_COLD
from tuner.study.plan import StudyPlan
from variants import Config, Family

LEADERS_AGAIN = 2  # the group's fastest configurations of other runs measured again


def leaders_of_other_runs(
    stored: pd.DataFrame | None,
    plan: StudyPlan,
    op: str,
    run_id: str,
    measured: Collection[str],
    families: Mapping[str, Family] | None = None,
    count: int = LEADERS_AGAIN,
    l2: str = L2_COLD,
) -> list[Config]:
    """Up to `count` configurations served first for the plan's group (GPU, shape, dtype) from
    rows of other studies and runs than the plan's and `run_id`, whose family it searches
    (`families`; None: any): the fastest of each of the `count` fastest families, topped up with
    the next fastest configurations; none where the run measured (`measured`: config keys) any
    configuration those rows hold, since that already links it to them."""
    if stored is None or stored.empty or count <= 0:
        return []
    shape = plan.shape
    mask = stored["gpu"].to_numpy() == plan.gpu
    mask &= stored["dtype"].astype(str).to_numpy() == plan.dtype.name
    for column in ("B", "T", "NH", "NH_KV", "HD"):
        mask &= stored[column].to_numpy() == getattr(shape, column)
    for column, own in (("run_id", run_id), ("study", plan.study_name)):
        if column in stored.columns:
            mask &= stored[column].astype(str).to_numpy() != own
    order = ranked(stored[np.asarray(mask, dtype=bool)], l2)
    if not set(measured).isdisjoint(order["config_key"].astype(str)):
        return []  # the run already shares a configuration with them: linked
    # The fastest configuration of each of the `count` fastest families first (what decides a
    # group's winner is mostly which family leads, and runs drift as much as families differ),
    # then, where fewer families ran, the next fastest configurations.
    served: list[Config] = []
    leading: dict[str, Config] = {}
    for family_name, params in order[["family", "params"]].itertuples(index=False):
        if families is not None and family_name not in families:
            continue
        parsed = parse_config(family_name, params, op=op)
        if parsed is None or parsed[0].rejection(shape, plan.dtype, parsed[1]) is not None:
            continue
        served.append(parsed[1])
        leading.setdefault(family_name, parsed[1])
        if len(leading) == count:
            break
    found = list(leading.values())[:count]
    return found + [c for c in served if c not in found][: count - len(found)]


def leaders_plan(plan: StudyPlan, configs: list[Config], run_id: str) -> StudyPlan:
    """The follow-up study of `plan` that measures `configs` and nothing else."""
    return dataclasses.replace(
        plan,
        study_name=f"{plan.study_name}/leaders/{run_id}",
        trials=len(configs),
        warm_start=tuple(configs),
        timeout_s=None,
        target_value=None,
    )
