"""Asking trials ahead: their kernels are prepared together, the budget holds, nothing is
measured twice, and a stop leaves no trial running."""

from __future__ import annotations

import optuna
import pytest
import tuner_fakes as F

from tuner.interrupt import StopFlag
from tuner.study.ask_ahead import ask_ahead, told_if_left
from tuner.study.claims import ATTR_KEY, ATTR_STATUS, INTERRUPTED
from tuner.study.loop import StudyLoop
from tuner.study.plan import StudyPlan
from tuner.study.space import SearchSpace
from variants import BASELINE, DTYPES

optuna.logging.set_verbosity(optuna.logging.WARNING)
BF16 = DTYPES["bf16"]


def plan(**kw) -> StudyPlan:
    base = dict(gpu="h200", shape=F.SMALL, dtype=BF16, study_name="s", seed=3, trials=13, ahead=4)
    base.update(kw)
    return StudyPlan(**base)


def test_batches_are_prepared_together_and_measured_once_each_within_the_budget() -> None:
    runner = F.RecordingRunner()
    warm = tuple(c for c in SearchSpace(F.SMALL, BF16).configs if c != BASELINE)[:2]
    storage = optuna.storages.InMemoryStorage()
    outcome = StudyLoop(plan(warm_start=warm), runner, storage).run()
    measured = [c[2] for c in runner.calls]
    assert len(measured) == len(set(measured)) == 13 == len(outcome.measured)
    assert measured[:3] == [*warm, BASELINE]
    assert [len(b) for b in runner.prepared][:3] == [4, 4, 4]  # 13 = 4 + 4 + 4 + 1
    assert all(len(b) <= 4 for b in runner.prepared)
    assert runner.prepared[0][:3] == [(F.SMALL, BF16, c) for c in (*warm, BASELINE)]
    prepared = [w[2] for b in runner.prepared for w in b]
    # the last trial, asked alone, compiles when it is measured
    assert set(measured[:12]) == set(prepared) and len(prepared) == 12
    study = optuna.load_study(study_name="s", storage=storage)
    assert not study.get_trials(states=(optuna.trial.TrialState.RUNNING,))


def test_one_at_a_time_prepares_nothing() -> None:
    runner = F.RecordingRunner()
    StudyLoop(plan(ahead=1, trials=5), runner, None).run()
    assert len(runner.calls) == 5 and runner.prepared == []


def test_a_batch_never_asks_past_the_budget() -> None:
    runner = F.RecordingRunner()
    storage = optuna.storages.InMemoryStorage()
    StudyLoop(plan(trials=6, ahead=8), runner, storage).run()
    assert len(runner.calls) == 6 and [len(b) for b in runner.prepared] == [6]
    study = optuna.load_study(study_name="s", storage=storage)
    assert len(study.trials) == 6  # none over budget: the places left bound the batch


def test_a_stop_in_a_batch_leaves_no_trial_running() -> None:
    stop = StopFlag()

    def bench(shape, dtype, config):
        if len(runner.calls) == 2:
            stop.set()
        return F.synthetic_bench(shape, dtype, config)

    runner = F.RecordingRunner(bench)
    storage = optuna.storages.InMemoryStorage()
    outcome = StudyLoop(plan(), runner, storage, stop=stop).run()
    assert outcome.interrupted and len(outcome.measured) == 2
    study = optuna.load_study(study_name="s", storage=storage)
    states = [t.state for t in study.trials]
    assert optuna.trial.TrialState.RUNNING not in states and len(states) == 4
    pruned = [t for t in study.trials if t.state == optuna.trial.TrialState.PRUNED]
    assert len(pruned) == 2 and all(t.user_attrs[ATTR_STATUS] == INTERRUPTED for t in pruned)


def test_asked_trials_claim_distinct_configurations_and_those_left_are_told() -> None:
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=0, constant_liar=True))
    space = SearchSpace(F.SMALL, BF16)
    batch = ask_ahead(study, space, 5)
    keys = [t.user_attrs.get(ATTR_KEY) for t, c in batch if c is not None]
    assert len(batch) == 5 and all(k is not None for k in keys)
    with told_if_left(study, [t for t, _ in batch]) as run:
        first = next(run)
        study.tell(first, 1.0)
    states = [t.state for t in study.trials]
    assert states[0] == optuna.trial.TrialState.COMPLETE
    assert states[1:] == [optuna.trial.TrialState.PRUNED] * 4


def test_each_trial_is_seen_the_moment_it_exists_and_a_failed_ask_leaves_none_running() -> None:
    study = optuna.create_study()
    space = SearchSpace(F.SMALL, BF16)
    seen: list[tuple[int, dict]] = []

    def on_ask(trial: optuna.trial.Trial) -> None:
        seen.append((trial.number, dict(trial.params)))  # nothing sampled or claimed yet
        if len(seen) == 4:  # the second of the next batch
            raise optuna.exceptions.UpdateFinishedTrialError("another worker failed it")

    assert [t.number for t, _ in ask_ahead(study, space, 2, on_ask=on_ask)] == [n for n, _ in seen]
    assert all(params == {} for _, params in seen)
    with pytest.raises(optuna.exceptions.UpdateFinishedTrialError):
        ask_ahead(study, space, 4, on_ask=on_ask)
    asked_then = study.trials[2:]
    assert [t.state for t in asked_then] == [optuna.trial.TrialState.PRUNED] * 2
    assert all(t.user_attrs[ATTR_STATUS] == INTERRUPTED for t in asked_then)
