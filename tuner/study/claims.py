"""De-duplication and the budget: no configuration is measured twice for one GPU, shape and
dtype, and a study measures at most its budget of distinct configurations, however many
workers share it.

A trial claims its configuration (ATTR_KEY), then reads the study (`Snapshot`): it answers
from another trial that holds the configuration's result, yields (pruned, no row) if a
running trial claims it too, and otherwise takes a place in the budget (`slots_before`) or
waits for the running trials before it to settle. Two workers that claim at once may both
yield, never both measure: each writes its claim before it reads the others'. Right before
measuring it looks in the results store again (`tuner.study.store_watch`): rows any worker wrote.

Workers sharing a study tell each other what a trial is doing through its user attributes:
the configuration it claims (ATTR_KEY), then what it ended as (`record`, read back by
`recorded`), written after the row is on disk and before the trial is told to Optuna. A
worker answers from another's trial without reading its row, even from a trial whose worker
died after recording (its retried copy carries the record).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any, NamedTuple

import optuna
import pandas as pd
from optuna.trial import FrozenTrial, Trial, TrialState

from results.schema import Status, hold_or_zero, holds, l2_states, ops_of
from tuner.interrupt import TrialInterrupted
from tuner.runners.runner import Measurement
from variants import DEFAULT_OP, FAMILIES, DType, Family, Shape, op_of

# Trial user attributes.
ATTR_KEY = "config_key"  # the configuration a trial claims
ATTR_STATUS = "status"
ATTR_TIME = "time_ms"
ATTR_COPY = "copy_ms"
ATTR_SOURCE = "answered_from"  # "store" or "study" when nothing was measured
# When (epoch seconds) the trial began measuring: admitted, answered by no row. A running trial
# without it is still being admitted (it may yet answer from another trial, or yield).
ATTR_MEASURING = "measuring_since"


def stored_answers(
    frame: pd.DataFrame,
    gpu: str,
    shape: Shape,
    dtype: DType,
    families: Mapping[str, Family] | None = None,
    hold_us: float | None = None,
    l2: str | None = None,
) -> dict[str, dict[str, Any]]:
    """config key -> the stored row that answers it: same GPU, shape, dtype and kernel
    source, timed alike (`hold_us`, `l2`; None: however it was timed). A configuration measured
    more than once answers with its median ok row, or its latest failure when it never ran
    correctly."""
    if frame.empty:
        return {}
    rows = answering_rows(frame, gpu, shape, dtype, families, hold_us, l2)
    answers: dict[str, dict[str, Any]] = {}
    for key, group in rows.groupby("config_key", sort=False):
        ok = group[group["status"] == Status.OK].sort_values("time_ms")
        pick = ok.iloc[(len(ok) - 1) // 2] if not ok.empty else group.sort_values("timestamp").iloc[-1]
        answers[str(key)] = pick.to_dict()
    return answers


def answering_rows(
    frame: pd.DataFrame,
    gpu: str,
    shape: Shape,
    dtype: DType,
    families: Mapping[str, Family] | None = None,
    hold_us: float | None = None,
    l2: str | None = None,
) -> pd.DataFrame:
    """The rows that may answer a study of (gpu, shape, dtype) timed with `hold_us` in L2
    state `l2`: its own, of the current kernel sources, timed alike (rows of another hold or
    state rank apart and are measured again; None: any). The store and other workers' files
    are read through this one filter."""
    registry = FAMILIES if families is None else families
    op = op_of(next(iter(registry.values()))).name if registry else DEFAULT_OP
    mask = (frame["gpu"] == gpu) & (frame["dtype"] == dtype.name) & (ops_of(frame) == op)
    for name, value in shape.as_dict().items():
        mask &= frame[name] == value
    rows = frame[mask]
    hashes = {n: f.source_hash for n, f in registry.items()}
    rows = rows[rows["family"].map(hashes) == rows["source_hash"]]
    if hold_us is not None:
        rows = rows[holds(rows) == hold_or_zero(hold_us)]
    if l2 is not None:
        rows = rows[l2_states(rows) == l2]
    return rows


# What `mark` says of a trial that measured nothing (it answers nothing): the statuses that
# never reach a row, and two that are not statuses of a configuration at all.
INTERRUPTED = "interrupted"  # the run was stopped before the trial measured anything
OVER_BUDGET = "over_budget"  # the study already holds its --trials configurations
NOTHING_MEASURED = frozenset(
    {Status.INVALID.value, Status.DUPLICATE.value, Status.MISSING.value, INTERRUPTED, OVER_BUDGET}
)


def answers(trial: FrozenTrial) -> bool:
    """Whether trial holds a result another worker can answer from: a completed trial that
    measured or answered its configuration, or one whose worker recorded its result (its row
    was written first) and then died before telling Optuna."""
    status = trial.user_attrs.get(ATTR_STATUS)
    if trial.user_attrs.get(ATTR_KEY) is None or status is None or status in NOTHING_MEASURED:
        return False
    if trial.state == TrialState.COMPLETE:
        return trial.value is not None
    return trial.state == TrialState.FAIL and ATTR_TIME in trial.user_attrs


def value_of(trial: FrozenTrial) -> float:
    """The objective value a trial that `answers` stands for."""
    if trial.state == TrialState.COMPLETE and trial.value is not None:
        return float(trial.value)
    measurement, copy_ms = recorded(trial)
    if not measurement.ok or not math.isfinite(measurement.time_ms) or not copy_ms > 0:
        return math.inf
    return measurement.time_ms / copy_ms


class Snapshot:
    """One read of every trial of the study, and what the workers learn from it."""

    def __init__(self, trials: list[FrozenTrial]) -> None:
        self.trials = trials
        self.done: dict[str, FrozenTrial] = {}  # key -> the first trial that answers it
        self.running: list[FrozenTrial] = []
        self.waiting = 0
        self.retried: set[str] = set()  # configurations of the waiting retries of dead workers
        self.missing: set[str] = set()  # configurations a replayed recording lacks
        for t in trials:
            key = t.user_attrs.get(ATTR_KEY)
            if t.state == TrialState.RUNNING:
                self.running.append(t)
            elif t.state == TrialState.WAITING:
                self.waiting += 1
                if key is not None and "failed_trial" in t.system_attrs:
                    self.retried.add(key)  # a dead worker's claim, queued again
            elif key is not None and answers(t):
                self.done.setdefault(key, t)
            elif key is not None and t.user_attrs.get(ATTR_STATUS) == Status.MISSING.value:
                self.missing.add(key)

    @classmethod
    def read(cls, study: optuna.Study) -> Snapshot:
        return cls(study.get_trials(deepcopy=False))

    def values(self) -> dict[str, float]:
        """config key -> value, over the trials that answer."""
        return {k: value_of(t) for k, t in self.done.items()}

    def claims(self, me: int | None = None) -> dict[str, FrozenTrial]:
        """key -> a running trial (not number `me`) that claims it."""
        return {
            t.user_attrs[ATTR_KEY]: t
            for t in self.running
            if t.number != me and t.user_attrs.get(ATTR_KEY) is not None
        }

    def places_left(self, keys: Collection[str], unavailable: Collection[str], goal: int) -> int:
        """How many more trials could measure something now: configurations of `keys` neither
        answered, claimed nor unavailable, and places in the budget `goal` that the answered,
        the claimed and the running trials that have not claimed yet leave."""
        claimed = self.claims()
        settled = self.done.keys() | self.missing | set(unavailable)
        free = set(keys) - settled - claimed.keys()
        taken = len(settled | claimed.keys()) + sum(1 for t in self.running if ATTR_KEY not in t.user_attrs)
        return max(0, min(len(free), goal - taken))

    def slots_before(self, me: int, written: Collection[str] = ()) -> tuple[int, int]:
        """(settled, taken): the distinct configurations the study holds answers for (or rows
        of, `written`), and those plus what the trials that come before `me` may add: the
        running trials numbered below `me` (one each for a trial that has not claimed yet)
        and the waiting retries of dead workers (whose claims came before, and stand). Trial
        numbers are handed out by the storage, so the running trials agree on who comes
        first: a trial measures only if `taken` is below the budget, and no two trials can
        both take the last place."""
        keys = set(self.done) | set(written)
        settled = len(keys)
        keys |= self.retried
        unclaimed = 0
        for t in self.running:
            if t.number >= me:
                continue
            key = t.user_attrs.get(ATTR_KEY)
            if key is None:
                unclaimed += 1
            else:
                keys.add(key)
        return settled, len(keys) + unclaimed


class Claims(NamedTuple):
    """Who else holds a configuration."""

    finished: FrozenTrial | None  # a trial of the study that answers it
    live: bool  # whether a running trial claims it


def claims_on(study: optuna.Study, key: str, me: int) -> Claims:
    """The other trials of the study (all but trial number `me`) that hold key."""
    snap = Snapshot.read(study)
    finished = snap.done.get(key)
    if finished is not None and finished.number == me:
        finished = None
    return Claims(finished, key in snap.claims(me))


def distinct_done(study: optuna.Study) -> dict[str, float]:
    """config key -> value, over the study's trials that answer."""
    return Snapshot.read(study).values()


def finished_trial(study: optuna.Study, key: str) -> FrozenTrial:
    """The study's first trial that answers key (StopIteration if none)."""
    return next(
        t for t in study.get_trials(deepcopy=False) if t.user_attrs.get(ATTR_KEY) == key and answers(t)
    )


class Yielded(optuna.TrialPruned):
    """A trial pruned because another running trial holds its configuration."""


def admit(
    study: optuna.Study,
    trial: Trial,
    key: str,
    goal: int,
    wait: Callable[[Snapshot], bool],
    written: Callable[[], Collection[str]] = frozenset,
) -> FrozenTrial | None:
    """Whether trial, which claimed key, may measure it: returns the study's finished trial
    that answers key, if there is one, else None (measure). Prunes it (marked DUPLICATE) when
    another running trial claims key (`Yielded`), or (OVER_BUDGET) when the study holds its `goal`
    configurations. While the running trials before it may take the last places, calls
    `wait(snapshot)` and looks again; `wait` returns True to give up (raises `TrialInterrupted`).
    `written()`: configurations settled outside the study's answers (rows of the study whose
    trials were never told)."""
    while True:
        snap = Snapshot.read(study)
        finished = snap.done.get(key)
        if finished is not None:
            return finished
        if key in snap.claims(trial.number):
            mark(trial, Status.DUPLICATE)
            raise Yielded(f"{key} is being measured by another trial")
        # a configuration with a row of its own is in the budget already: it answers from it
        settled, taken = snap.slots_before(trial.number, {*snap.missing, *written()} - {key})
        if settled >= goal:
            mark(trial, OVER_BUDGET)
            raise optuna.TrialPruned(f"the study holds its {goal} configurations")
        if taken < goal:
            return None
        if wait(snap):
            raise TrialInterrupted


def claim(trial: Trial, key: str) -> None:
    """Claim key for trial: written before `claims_on` reads the other trials' claims."""
    trial.set_user_attr(ATTR_KEY, key)


def mark(trial: Trial, status: Status | str) -> None:
    """What a trial that measured nothing ended as (invalid, duplicate, missing, interrupted,
    over budget)."""
    trial.set_user_attr(ATTR_STATUS, str(status))


def measuring(trial: Trial) -> None:
    """Mark trial as measuring its configuration from now on (ATTR_MEASURING)."""
    trial.set_user_attr(ATTR_MEASURING, time.time())


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
