"""A study's budget: how many distinct configurations it may hold, and what counts.

`--trials` is distinct configurations in the study, however many workers share it. Against
it count the configurations the study holds answers for, those a replayed recording lacks
(never measurable), and those with rows of the study in the results directory whose trials
were never told (a worker killed between writing its row and telling Optuna: the row
stands, and its configuration is not measured again by whoever picks up the retried trial).
"""

from __future__ import annotations

import math

import optuna

from tuner.study.claims import Snapshot
from tuner.study.plan import BUDGET_MET, TARGET_MET, StudyPlan
from tuner.study.space import SearchSpace
from tuner.study.store_watch import StoreWatch


class Budget:
    def __init__(self, plan: StudyPlan, space: SearchSpace, watch: StoreWatch | None) -> None:
        self.plan, self.space, self.watch = plan, space, watch
        self.unavailable: set[str] = set()  # missing from a recording: never measurable here
        self.study: optuna.Study | None = None  # set once the study is open

    def goal(self) -> int:
        size = len(self.space)
        plan = self.plan
        return size if plan.trials is None or plan.sampler == "grid" else min(plan.trials, size)

    def elsewhere(self) -> set[str]:
        """Configurations settled outside the study's answers: missing from the recording, or
        with rows of this study whose trials were never told."""
        written = self.watch.study_keys(self.plan.study_name) if self.watch is not None else set()
        return self.unavailable | written

    def excluded(self) -> set[str]:
        """What a new trial must not take (`tuner.study.unseen.UnseenFirst` reads it): answered or
        claimed in the study, or settled elsewhere."""
        if self.study is None:
            return self.elsewhere()
        snap = Snapshot.read(self.study)
        return set(snap.done) | set(snap.claims()) | snap.missing | self.elsewhere()

    def finished(self, snap: Snapshot, elsewhere: set[str] | None = None) -> bool:
        """The budget is met, or the best value reached the plan's target (`elsewhere`: this
        moment's `elsewhere()`, when the caller has it). The budget is not met while a dead
        worker's retry waits (it answers from the row, if there is one), and a configuration
        with a row that a running trial still claims does not count yet: that trial's worker
        died after writing it, and the study waits for its retry rather than leave the trial
        running."""
        return self.reason(snap, elsewhere) is not None

    def held(self, snap: Snapshot, elsewhere: set[str] | None = None) -> int:
        """The distinct configurations that count against the budget (see `finished`)."""
        settled = (self.elsewhere() if elsewhere is None else elsewhere) - snap.claims().keys()
        return len(snap.done.keys() | snap.missing | settled)

    def reason(self, snap: Snapshot, elsewhere: set[str] | None = None) -> str | None:
        """Why the study is finished (`BUDGET_MET` or `TARGET_MET`), or None while it is not."""
        if not snap.retried and self.held(snap, elsewhere) >= self.goal():
            return BUDGET_MET
        target = self.plan.target_value
        if target is not None and min(snap.values().values(), default=math.inf) <= target:
            return TARGET_MET
        return None
