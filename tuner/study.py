"""One Optuna study per (GPU, shape, dtype): the loop that asks configurations, measures
them through a Runner and writes every trial.

What a trial reports to Optuna (minimized): the kernel's time over the same-run device
copy. A failure (compile error, launch error, wrong result, timeout, crash) is a row with
its status and infinite time, and the trial completes with the value +inf: Optuna accepts
inf (only NaN is refused), TPE ranks it among the worst so it steers away, and GPSampler
clips it to the worst finite value. An invalid combination of parameters is pruned without
a row (nothing ran).

No configuration is measured twice for one GPU, shape and dtype (`tuner.claims`): a trial
answers from the results store or the study's finished trials when it can, and yields when
another live trial claims its configuration. A row reaches the results store before its
trial is reported, so what the study holds is always on disk.
"""

from __future__ import annotations

import json
import math
import os
import random
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.storages import BaseStorage
from optuna.trial import FrozenTrial, Trial, TrialState

from results.schema import Status
from tuner.bench import guarded
from tuner.claims import (
    ATTR_KEY,
    ATTR_SOURCE,
    claim,
    claims_on,
    distinct_done,
    finished_trial,
    mark,
    record,
    recorded,
)
from tuner.rows import ResultsSink, StudyInfo, objective_value, trial_row
from tuner.runner import Measurement, Runner
from tuner.samplers import make_sampler
from tuner.space import SearchSpace
from variants import BASELINE, FAMILIES, Config, DType, Family, Shape

# How many trials one process may ask per configuration it still has to measure
# (duplicates and invalid combinations cost a trial but no measurement).
ASKS_PER_CONFIG = 10
# How often (in trials) a worker rereads the whole study to see what other workers did.
REFRESH_EVERY = 10
GRID_CHUNK = 16
GRID_PASSES = 5


@dataclass(frozen=True)
class StudyPlan:
    gpu: str
    shape: Shape
    dtype: DType
    study_name: str
    sampler: str = "tpe"
    seed: int | None = None
    trials: int | None = 40  # distinct configurations; None: all of them
    timeout_s: float | None = None
    target_value: float | None = None  # stop once the best objective is at or below it


@dataclass
class StudyOutcome:
    plan: StudyPlan
    copy_ms: float
    space_size: int
    rows: dict[str, dict[str, Any]] = field(default_factory=dict)  # config key -> row
    measured: list[tuple[str, float]] = field(default_factory=list)  # (key, value), in order
    answered: int = 0
    invalid: int = 0
    yielded: int = 0
    missing: int = 0
    failures: dict[str, int] = field(default_factory=dict)  # status -> count

    @property
    def best_value(self) -> float:
        values = [objective_value(r) for r in self.rows.values()]
        return min(values, default=math.inf)


ProgressHook = Callable[[int, int, float], None]  # (distinct done, goal, best value)


class StudyLoop:
    """Runs one plan against a runner; `run()` returns what happened."""

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
    ) -> None:
        self.plan = plan
        self.runner = runner
        self.storage = storage
        self.run_id = run_id
        self.sink = sink
        self.families = dict(FAMILIES if families is None else families)
        self.space = SearchSpace(plan.shape, plan.dtype, self.families)
        self.known: dict[str, dict[str, Any]] = {
            k: dict(v) for k, v in (known or {}).items() if k in self.space.keys
        }
        self.progress = progress
        self.in_study: set[str] = set()
        self._stopped = False
        self.unavailable: set[str] = set()  # missing from a recording: never measurable here
        self.outcome: StudyOutcome | None = None

    # --- the study --------------------------------------------------------------------
    def _study(self) -> optuna.Study:
        return optuna.create_study(
            study_name=self.plan.study_name,
            storage=self.storage,
            sampler=make_sampler(self.plan.sampler, self.plan.seed),
            direction="minimize",
            load_if_exists=True,
        )

    def _enqueue(self, study: optuna.Study, configs: list[Config]) -> int:
        """Queue configs (skipping those already queued or running). Returns how many."""
        pending = {
            json.dumps(t.system_attrs.get("fixed_params", t.params), sort_keys=True)
            for t in study.get_trials(deepcopy=False, states=(TrialState.WAITING, TrialState.RUNNING))
        }
        queued = 0
        for config in configs:
            params = self.space.params_of(config)
            if json.dumps(params, sort_keys=True) not in pending:
                study.enqueue_trial(params)
                queued += 1
        return queued

    def goal(self) -> int:
        size = len(self.space)
        return (
            size if self.plan.trials is None or self.plan.sampler == "grid" else min(self.plan.trials, size)
        )

    def run(self) -> StudyOutcome:
        plan = self.plan
        copy_ms = self.runner.copy_time(plan.shape, plan.dtype)
        outcome = StudyOutcome(plan=plan, copy_ms=copy_ms, space_size=len(self.space))
        self.outcome = outcome
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study = self._study()
            done = distinct_done(study)
            for key, value in done.items():
                self._remember_study_answer(key, value, study)
                self.in_study.add(key)
            goal = self.goal()
            if self.space.configs and not self._finished(done, goal):
                objective = self._objective(study, copy_ms, outcome)
                callback = self._after_trial(goal)
                if plan.sampler == "grid":
                    self._grid(study, objective, callback, done)
                else:
                    known = done.keys() | self.known.keys()
                    fresh = BASELINE in self.space and BASELINE.key not in known
                    queued = self._enqueue(study, [BASELINE] if fresh else [])
                    study.optimize(
                        objective,
                        n_trials=queued + ASKS_PER_CONFIG * max(goal - len(done), 1),
                        timeout=plan.timeout_s,
                        callbacks=[callback],
                        catch=(),
                        gc_after_trial=False,
                    )
        for key, row in self.known.items():
            outcome.rows.setdefault(key, row)
        return outcome

    def _prepare(self, configs: list[Config]) -> None:
        """Let a runner that can (the GPU's) compile many kernels at once, in parallel."""
        if configs:
            self.runner.prepare([(self.plan.shape, self.plan.dtype, c) for c in configs])

    def _grid(self, study: optuna.Study, objective, callback, done: Mapping[str, float]) -> None:
        """Every valid configuration, llm.c's first, queued a chunk at a time (a long queue
        of waiting trials makes every storage read slow). Workers shuffle differently, so
        that two of them rarely queue the same chunk; a configuration that two workers both
        yielded is queued again in a later pass."""
        rng = random.Random(f"{self.plan.seed}-{os.getpid()}")
        deadline = None if self.plan.timeout_s is None else time.monotonic() + self.plan.timeout_s
        for attempt in range(GRID_PASSES):
            settled = done.keys() | self.known.keys() | self.unavailable | self.in_study
            rest = [c for c in self.space.configs if c != BASELINE and c.key not in settled]
            rng.shuffle(rest)
            todo = ([BASELINE] if BASELINE in self.space and BASELINE.key not in settled else []) + rest
            if not todo or self._stopped:
                return
            if attempt:
                time.sleep(rng.uniform(0.0, 0.5))  # two workers that collided now part
            else:
                self._prepare(todo)
            while todo:
                if deadline is not None and time.monotonic() >= deadline:
                    return
                chunk, todo = todo[:GRID_CHUNK], todo[GRID_CHUNK:]
                queued = self._enqueue(study, [c for c in chunk if c.key not in self.in_study])
                if not queued:
                    continue
                study.optimize(
                    objective,
                    n_trials=queued,
                    timeout=None if deadline is None else max(deadline - time.monotonic(), 0.001),
                    callbacks=[callback],
                    catch=(),
                    gc_after_trial=False,
                )
                if self._stopped:
                    return
            done = distinct_done(study)

    def _finished(self, done: Mapping[str, float], goal: int) -> bool:
        if len(done.keys() | self.unavailable) >= goal:
            return True
        target = self.plan.target_value
        return target is not None and min(done.values(), default=math.inf) <= target

    def _after_trial(self, goal: int) -> Callable[[optuna.Study, FrozenTrial], None]:
        seen: dict[str, float] = {}

        def callback(study: optuna.Study, trial: FrozenTrial) -> None:
            # What this process finished, and every REFRESH trials what all workers did
            # (reading every trial of a shared storage after each one is slow).
            key = trial.user_attrs.get(ATTR_KEY)
            if trial.state == TrialState.COMPLETE and key is not None and trial.value is not None:
                seen[key] = trial.value
            if trial.number % REFRESH_EVERY == 0 or len(seen.keys() | self.unavailable) >= goal:
                seen.update(distinct_done(study))
            if self.progress is not None:
                self.progress(min(len(seen), goal), goal, min(seen.values(), default=math.inf))
            if self._finished(seen, goal):
                self._stopped = True
                study.stop()

        return callback

    # --- one trial --------------------------------------------------------------------
    def _objective(
        self, study: optuna.Study, copy_ms: float, outcome: StudyOutcome
    ) -> Callable[[Trial], float]:
        plan = self.plan

        def objective(trial: Trial) -> float:
            config = self.space.suggest(trial)
            if config is None:
                outcome.invalid += 1
                mark(trial, Status.INVALID)
                raise optuna.TrialPruned("no valid configuration has these parameters")
            key = config.key
            claim(trial, key)
            row = self.known.get(key)
            if row is not None:
                self.in_study.add(key)
                return self._answer(trial, row, "store", outcome)
            finished, live = claims_on(study, key, trial.number)
            if finished is not None:
                self.in_study.add(key)
                row = self._remember_study_answer(key, finished.value, study, finished)
                return self._answer(trial, row, "study", outcome)
            if live:
                outcome.yielded += 1
                mark(trial, Status.DUPLICATE)
                raise optuna.TrialPruned(f"{key} is being measured by another trial")
            measurement = self._measure(config)
            if measurement.status == Status.MISSING:
                outcome.missing += 1
                self.unavailable.add(key)
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
                self.sink.append(row)  # on disk before Optuna hears of it
            self.known[key] = row
            self.in_study.add(key)
            value = objective_value(row)
            outcome.measured.append((key, value))
            if row["status"] != Status.OK:
                outcome.failures[row["status"]] = outcome.failures.get(row["status"], 0) + 1
            record(trial, row)
            return value

        return objective

    def _measure(self, config: Config) -> Measurement:
        return guarded(self.runner.measure, self.plan.shape, self.plan.dtype, config)

    def _answer(self, trial: Trial, row: Mapping[str, Any], source: str, outcome: StudyOutcome) -> float:
        outcome.answered += 1
        trial.set_user_attr(ATTR_SOURCE, source)
        record(trial, row)
        return objective_value(row)

    def _remember_study_answer(
        self, key: str, value: float | None, study: optuna.Study, trial: FrozenTrial | None = None
    ) -> dict[str, Any]:
        """A row for a configuration another trial measured (for answers and the report;
        it is not written: the worker that measured it wrote it)."""
        if key in self.known:
            return self.known[key]
        if trial is None:
            trial = finished_trial(study, key)
        config = self.space.config_of(trial.params)
        if config is None or config.key != key:
            config = next(c for c in self.space.configs if c.key == key)
        measurement, copy_ms = recorded(trial)
        info = StudyInfo(gpu=self.plan.gpu, run_id="", study=self.plan.study_name, trial=trial.number)
        row = trial_row(
            self.runner.identity,
            self.plan.shape,
            self.plan.dtype,
            config,
            measurement,
            copy_ms,
            info,
            self.families,
        )
        self.known[key] = row
        return row
