"""De-duplication: no configuration is measured twice for one GPU, shape and dtype.

Before measuring, a trial looks for an answer in the results store (rows with the same
kernel source, `stored_answers`) and in the study's finished trials; it then claims the
configuration and yields (pruned, no row) if another live trial of the study claims it too
(`claims_on`). Two workers that claim at once may both yield, never both measure: each writes
its claim before it reads the others'.

Workers sharing a study tell each other what a trial is doing through its user attributes:
the configuration it claims (ATTR_KEY), then what it ended as (`record`, read back by
`recorded`), so that a worker answers from another's trial without its row.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, NamedTuple

import optuna
import pandas as pd
from optuna.trial import FrozenTrial, Trial, TrialState

from results.schema import Status
from tuner.runner import Measurement
from variants import FAMILIES, DType, Family, Shape

# Trial user attributes.
ATTR_KEY = "config_key"  # the configuration a trial claims
ATTR_STATUS = "status"
ATTR_TIME = "time_ms"
ATTR_COPY = "copy_ms"
ATTR_SOURCE = "answered_from"  # "store" or "study" when nothing was measured
# A claim without heartbeat this old belongs to a dead worker (a trial takes seconds).
STALE_CLAIM_S = 600.0


def stored_answers(
    frame: pd.DataFrame,
    gpu: str,
    shape: Shape,
    dtype: DType,
    families: Mapping[str, Family] | None = None,
) -> dict[str, dict[str, Any]]:
    """config key -> the stored row that answers it: same GPU, shape, dtype and kernel
    source. A configuration measured more than once answers with its median ok row, or its
    latest failure when it never ran correctly."""
    if frame.empty:
        return {}
    registry = FAMILIES if families is None else families
    mask = (frame["gpu"] == gpu) & (frame["dtype"] == dtype.name)
    for name, value in shape.as_dict().items():
        mask &= frame[name] == value
    rows = frame[mask]
    hashes = {n: f.source_hash for n, f in registry.items()}
    rows = rows[rows["family"].map(hashes) == rows["source_hash"]]
    answers: dict[str, dict[str, Any]] = {}
    for key, group in rows.groupby("config_key", sort=False):
        ok = group[group["status"] == Status.OK].sort_values("time_ms")
        pick = ok.iloc[(len(ok) - 1) // 2] if not ok.empty else group.sort_values("timestamp").iloc[-1]
        answers[str(key)] = pick.to_dict()
    return answers


class Claims(NamedTuple):
    """Who else holds a configuration."""

    finished: FrozenTrial | None  # a finished trial of the study that answers it
    live: bool  # whether a live trial (not stale) claims it


def claims_on(study: optuna.Study, key: str, me: int) -> Claims:
    """The other trials of the study (all but trial number `me`) that hold key."""
    finished, live = None, False
    horizon = datetime.now() - timedelta(seconds=STALE_CLAIM_S)
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.RUNNING)):
        if t.number == me or t.user_attrs.get(ATTR_KEY) != key:
            continue
        if t.state == TrialState.COMPLETE and t.user_attrs.get(ATTR_STATUS) not in (None, Status.DUPLICATE):
            finished = t
            break
        if t.state == TrialState.RUNNING and (t.datetime_start is None or t.datetime_start > horizon):
            live = True
    return Claims(finished, live)


def distinct_done(study: optuna.Study) -> dict[str, float]:
    """config key -> value, over the study's completed trials."""
    done: dict[str, float] = {}
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        key = t.user_attrs.get(ATTR_KEY)
        if key is not None and t.value is not None:
            done[key] = t.value
    return done


def finished_trial(study: optuna.Study, key: str) -> FrozenTrial:
    """The study's first completed trial of key (StopIteration if none)."""
    return next(
        t
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if t.user_attrs.get(ATTR_KEY) == key
    )


def claim(trial: Trial, key: str) -> None:
    """Claim key for trial: written before `claims_on` reads the other trials' claims."""
    trial.set_user_attr(ATTR_KEY, key)


def mark(trial: Trial, status: Status) -> None:
    """What a trial that measured nothing ended as (invalid, duplicate, missing)."""
    trial.set_user_attr(ATTR_STATUS, status.value)


def record(trial: Trial, row: Mapping[str, Any]) -> None:
    """What a trial's configuration ended as, for the other workers of the study."""
    trial.set_user_attr(ATTR_STATUS, row["status"])
    trial.set_user_attr(ATTR_TIME, float(row["time_ms"]))
    trial.set_user_attr(ATTR_COPY, float(row["copy_ms"]))


def recorded(trial: FrozenTrial) -> tuple[Measurement, float]:
    """(measurement, copy ms) as `record` left them on a finished trial (no message)."""
    attrs = trial.user_attrs
    status = Status(attrs.get(ATTR_STATUS, Status.OK))
    time_ms = float(attrs.get(ATTR_TIME, math.inf))
    copy_ms = float(attrs.get(ATTR_COPY, math.nan))
    if status == Status.OK:
        return Measurement(status=status, time_ms=time_ms), copy_ms
    return Measurement.failed(status, ""), copy_ms
