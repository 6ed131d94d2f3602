"""One Optuna study per (GPU, shape, dtype): the loop that asks configurations, measures
them through a Runner and writes every trial.

A trial reports to Optuna (minimized) its kernel's time over the same-run device copy. A
failure (compile or launch error, wrong result, timeout, crash) is a row with its status and
infinite time, and the trial's value is +inf: Optuna accepts inf (not NaN), TPE ranks it
among the worst, GPSampler clips it to the worst finite value. An invalid combination of
parameters is pruned without a row (nothing ran).

No configuration is measured twice for one GPU, shape and dtype (`tuner.study.claims`): a trial
answers from the study or the results store when it can (`tuner.study.known_rows`; the store is
read again right before measuring), and yields when another live trial claims it. A row
reaches the results store before its trial is recorded in the study and told, so what the
study holds is always on disk.

The budget (`--trials`) is distinct configurations in the study, however many workers share
it: a trial measures only while those answered, plus those the running trials before it
hold, are fewer (`Snapshot.slots_before`). The sampler is wrapped in
`tuner.study.unseen.UnseenFirst`, so no trial is spent on a configuration seen before, and the
loop ends when the budget is met or nothing unseen is left. The trials of dead workers are
failed and queued again (`tuner.study.liveness`); a worker that finds all that is left in others'
hands waits for their trials to settle, not to leave a dead one's configuration behind.
"""

from __future__ import annotations

import functools
import math
import time
import warnings
from collections.abc import Mapping
from typing import Any

import optuna
from optuna.storages import BaseStorage
from optuna.trial import Trial, TrialState

from results.schema import Status
from tuner.cli.defaults import HEARTBEAT_S
from tuner.interrupt import StopFlag, TrialInterrupted
from tuner.run.rows import ResultsSink, StudyInfo, objective_value, trial_row
from tuner.runners.bench import guarded
from tuner.runners.runner import Measurement, Runner
from tuner.study.ask_ahead import ask_ahead, compile_ahead, told_if_left
from tuner.study.budget import Budget
from tuner.study.claims import (
    ATTR_SOURCE,
    INTERRUPTED,
    Snapshot,
    Yielded,
    admit,
    claim,
    mark,
    measuring,
    record,
)
from tuner.study.known_rows import KnownRows
from tuner.study.liveness import WORKER, TrialKeeper, failed_meanwhile, reap, worker_alive_here, worker_id
from tuner.study.plan import EXHAUSTED, TIMED_OUT, ProgressHook, StudyOutcome, StudyPlan
from tuner.study.samplers import make_sampler
from tuner.study.space import SearchSpace
from tuner.study.store_watch import StoreWatch
from tuner.study.unseen import UnseenFirst
from tuner.study.warm_start import enqueue
from variants import BASELINE, Config, Family

# How many trials one process may ask per configuration it still has to measure (answers
# and yields cost a trial but no measurement); a guard, the loop ends long before.
ASKS_PER_CONFIG = 10
WAIT_S = 0.25  # between looks at the study while the trials of other workers settle
GRACE_S = 120.0  # without one for this long, its worker is taken for dead


class StudyLoop:
    """Runs one plan against a runner; `run()` returns what happened.

    Ask and tell, not `study.optimize` (one trial, or `plan.ahead`, at a time):
    a trial is stamped with this worker when asked, and kept alive until told
    (`tuner.study.liveness.TrialKeeper`); a stop request (`stop`, Ctrl-C) is looked at between
    trials and in every wait.
    """

    _keeper: TrialKeeper  # this worker's trials, while it asks and runs them

    def __init__(
        self,
        plan: StudyPlan,
        runner: Runner,
        storage: BaseStorage | str | None = None,
        *,
        run_id: str = "",
        sink: ResultsSink | None = None,
        known: Mapping[str, dict[str, Any]] | None = None,
        families: Mapping[str, Family] | None = None,
        progress: ProgressHook | None = None,
        stop: StopFlag | None = None,
        watch: StoreWatch | None = None,
        heartbeat_s: float = HEARTBEAT_S,
        grace_s: float = GRACE_S,
    ) -> None:
        self.plan = plan
        self.runner = runner
        self.storage = storage
        self.run_id = run_id
        self.sink = sink
        self.families = dict(
            runner.runnable_families(plan.shape, plan.dtype) if families is None else families
        )
        self.space = SearchSpace(plan.shape, plan.dtype, self.families)
        self.known = KnownRows(self.space, runner.identity, plan.gpu, plan.study_name, self.families, known)
        self.progress = progress
        self.stop = stop if stop is not None else StopFlag()
        self.watch = watch
        self.heartbeat_s = heartbeat_s
        self.grace_s = grace_s
        self.budget = Budget(plan, self.space, watch)
        self.outcome: StudyOutcome | None = None
        self.sampler: UnseenFirst | None = None

    # --- the study ---
    def _study(self) -> optuna.Study:
        self.sampler = UnseenFirst(
            make_sampler(self.plan.sampler, self.plan.seed), self.space, self.budget.excluded, self.plan.seed
        )
        return optuna.create_study(
            study_name=self.plan.study_name,
            storage=self.storage,
            sampler=self.sampler,
            direction="minimize",
            load_if_exists=True,
        )

    def run(self) -> StudyOutcome:
        plan = self.plan
        try:
            copy_ms = self.runner.copy_time(plan.shape, plan.dtype)
        except TrialInterrupted:
            self.stop.set()
            copy_ms = math.nan
        outcome = StudyOutcome(plan=plan, copy_ms=copy_ms, space_size=len(self.space))
        self.outcome = outcome
        if self.stop:
            outcome.interrupted = True
            return outcome
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed")
            study = self._study()
            self.budget.study = study
            snap = Snapshot.read(study)
            for key, trial in snap.done.items():
                self.known.from_trial(key, trial)
            outcome.held, outcome.goal = self.budget.held(snap), self.budget.goal()
            outcome.ended = self.budget.reason(snap) if self.space.configs else EXHAUSTED
            if outcome.ended is None:
                settled = snap.done.keys() | self.known.keys() | snap.missing
                if plan.sampler == "grid":
                    compile_ahead(
                        self.runner,
                        self.space,
                        [c for c in self.space.configs if c.key not in settled],
                        self.stop,
                    )
                first = [c for c in (*plan.warm_start, BASELINE) if c in self.space and c.key not in settled]
                queued = enqueue(study, self.space, first)
                limit = queued + ASKS_PER_CONFIG * max(self.budget.goal() - len(snap.done), 1)
                # while trials run, a first Ctrl-C lets the current one finish (tuner.interrupt)
                with self.stop.finishing(), TrialKeeper(study._storage, self.heartbeat_s) as self._keeper:
                    self._trials(study, copy_ms, outcome, limit)
        for key, row in self.known.items():
            outcome.rows.setdefault(key, row)
        outcome.interrupted = outcome.interrupted or bool(self.stop)
        return outcome

    def _reap(self, study: optuna.Study, snap: Snapshot) -> bool:
        """Fail the trials of dead workers (their configurations are queued again)."""
        others = [t for t in snap.running if t.user_attrs.get(WORKER) != self.me]
        failed = reap(study, others, self.grace_s)
        if self.outcome is not None:
            self.outcome.reaped += len(failed)
        return bool(failed)

    @functools.cached_property
    def me(self) -> str:
        """This worker, as its trials are stamped (host, pid, process start)."""
        return worker_id()

    def _trials(self, study: optuna.Study, copy_ms: float, outcome: StudyOutcome, limit: int) -> None:
        deadline = None if self.plan.timeout_s is None else time.monotonic() + self.plan.timeout_s
        goal = self.budget.goal()
        asked = 0
        while asked < limit and not self.stop:
            if deadline is not None and time.monotonic() >= deadline:
                outcome.ended = TIMED_OUT
                return
            snap = Snapshot.read(study)
            if self._reap(study, snap):
                snap = Snapshot.read(study)
            self._report(snap, goal)
            elsewhere = self.budget.elsewhere()  # one look at the results directory per round
            outcome.ended = self.budget.reason(snap, elsewhere)
            if outcome.ended is not None:
                return
            places = snap.places_left(self.space.keys, elsewhere, goal)
            if not snap.waiting and not places:
                if not snap.running:
                    outcome.ended = EXHAUSTED  # nothing left to measure, nothing in flight
                    return
                # what is left is in other workers' hands: wait for their trials to settle
                self.stop.sleep(WAIT_S)
                continue
            n = min(self.plan.ahead, max(places, 1), limit - asked)
            try:  # each stamped and kept alive from the moment it exists
                batch = ask_ahead(study, self.space, n, lambda t: self._keeper.keep(t._trial_id, self.me))
            except optuna.exceptions.UpdateFinishedTrialError:  # failed by another before its stamp
                self._keeper.release(*self._keeper.held())  # ask_ahead told them
                continue
            asked += len(batch)
            outcome.trials += len(batch)
            if len(batch) > 1:
                compile_ahead(self.runner, self.space, [c for _, c in batch if c is not None], self.stop)
            with told_if_left(study, [t for t, _ in batch]) as run:
                try:
                    for trial in run:
                        self._run_trial(study, trial, copy_ms, outcome)
                finally:  # those left are told as interrupted
                    self._keeper.release(*(t._trial_id for t, _ in batch))

    def _report(self, snap: Snapshot, goal: int) -> None:
        if self.progress is not None:
            values = snap.values()
            self.progress(min(len(values), goal), goal, min(values.values(), default=math.inf))

    def _run_trial(self, study: optuna.Study, trial: Trial, copy_ms: float, outcome: StudyOutcome) -> None:
        previous = self._keeper.previous(trial._trial_id)  # a retried trial's: the worker taken for dead
        with failed_meanwhile(trial.number):
            try:
                try:
                    value = self._objective(study, trial, copy_ms, outcome, previous)
                finally:
                    self._keeper.release(trial._trial_id)  # it is told next
            except optuna.TrialPruned:
                study.tell(trial, state=TrialState.PRUNED)
            except (TrialInterrupted, KeyboardInterrupt):
                # nothing was measured: no row; the configuration is free for the next run
                self.stop.set()
                outcome.interrupted = True
                mark(trial, INTERRUPTED)
                study.tell(trial, state=TrialState.PRUNED)
            except optuna.exceptions.UpdateFinishedTrialError:
                raise
            except BaseException:
                study.tell(trial, state=TrialState.FAIL)
                raise
            else:
                study.tell(trial, value)

    # --- one trial ---
    def _objective(
        self,
        study: optuna.Study,
        trial: Trial,
        copy_ms: float,
        outcome: StudyOutcome,
        previous: str | None = None,
    ) -> float:
        plan = self.plan
        inherited = self.known.inherited(trial)
        if inherited is not None:
            return self._answer(trial, inherited, "study", outcome)
        if self.stop:
            raise TrialInterrupted
        config = self.space.suggest(trial)
        if config is None:
            outcome.invalid += 1
            mark(trial, Status.INVALID)
            raise optuna.TrialPruned("no valid configuration has these parameters")
        key = config.key
        claim(trial, key)

        def wait(snap: Snapshot) -> bool:  # the running trials before this one may take the last places
            self._reap(study, snap)
            return self.stop.sleep(WAIT_S)

        try:
            finished = admit(study, trial, key, self.budget.goal(), wait, self.budget.elsewhere)
        except Yielded:
            outcome.yielded += 1
            raise
        if finished is not None:
            return self._answer(trial, self.known.from_trial(key, finished), "study", outcome)
        row = self.known.get(key)
        if row is None and self.watch is not None:
            row = self.watch.answer(key)  # any worker's rows, read right before measuring
            if row is not None:
                self.known[key] = row
        if row is not None:
            return self._answer(trial, row, "store", outcome)
        if previous is not None and previous != self.me and worker_alive_here(str(previous)):
            # Retried, but its worker lives on this host: it was slow, not dead (a heartbeat
            # starved past the grace period), and is measuring it still. Its row will answer.
            outcome.yielded += 1
            mark(trial, Status.DUPLICATE)
            raise optuna.TrialPruned(f"{key} is still being measured by {previous}")
        measuring(trial)
        measurement = self._measure(config)
        if measurement.status == Status.MISSING:
            outcome.missing += 1
            self.budget.unavailable.add(key)
            mark(trial, Status.MISSING)
            raise optuna.TrialPruned(measurement.message)
        info = StudyInfo(
            gpu=plan.gpu,
            run_id=self.run_id,
            study=plan.study_name,
            sampler=plan.sampler,
            seed=plan.seed,
            trial=trial.number,
        )
        row = trial_row(
            self.runner.identity,
            plan.shape,
            plan.dtype,
            config,
            measurement,
            copy_ms,
            info,
            self.families,
        )
        if self.sink is not None:
            self.sink.append(row)  # on disk before the study hears of it
        self.known[key] = row
        value = objective_value(row)
        outcome.measured.append((key, value))
        if row["status"] != Status.OK:
            outcome.failures[row["status"]] = outcome.failures.get(row["status"], 0) + 1
        record(trial, row)  # then in the study, then told
        return value

    def _measure(self, config: Config) -> Measurement:
        return guarded(self.runner.measure, self.plan.shape, self.plan.dtype, config)

    def _answer(self, trial: Trial, row: Mapping[str, Any], source: str, outcome: StudyOutcome) -> float:
        outcome.answered += 1
        trial.set_user_attr(ATTR_SOURCE, source)
        record(trial, row)
        return objective_value(row)
