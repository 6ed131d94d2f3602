from __future__ import annotations

import io
import math
import subprocess
import sys
import threading
from collections import Counter

import optuna
import pytest
import tuner_fakes as F

from results.schema import FAILURES, Status
from results.store import load_results
from tuner.cli.report import render_outcomes
from tuner.run.rows import ResultsSink
from tuner.runners.bench import BenchRunner
from tuner.runners.runner import Measurement
from tuner.study.claims import ATTR_KEY, ATTR_MEASURING, ATTR_SOURCE, ATTR_STATUS, Snapshot, claim, record
from tuner.study.liveness import WORKER, worker_id
from tuner.study.loop import StudyLoop
from tuner.study.plan import BUDGET_MET, EXHAUSTED, StudyPlan
from tuner.study.space import FAMILY_PARAM
from tuner.study.storage import make_storage
from tuner.study.store_watch import StoreWatch
from variants import BASELINE, DTYPES, FAMILIES, Config

optuna.logging.set_verbosity(optuna.logging.WARNING)
BF16 = DTYPES["bf16"]


def plan(**kw) -> StudyPlan:
    base = dict(gpu="h200", shape=F.SMALL, dtype=BF16, study_name="s", sampler="tpe", seed=1, trials=15)
    base.update(kw)
    return StudyPlan(**base)


def test_baseline_first_then_distinct_configs_up_to_the_budget(tmp_path) -> None:
    runner = F.synthetic_runner()
    sink = ResultsSink(tmp_path, "h200", "run-a")
    outcome = StudyLoop(plan(), runner, None, run_id="run-a", sink=sink).run()
    keys = [c.key for _, _, c in runner.calls]
    assert keys[0] == BASELINE.key
    assert len(keys) == len(set(keys)) == 15
    assert [k for k, _ in outcome.measured] == keys
    frame, _ = load_results(tmp_path)
    assert sorted(frame["config_key"]) == sorted(keys)
    assert set(frame["run_id"]) == {"run-a"} and set(frame["study"]) == {"s"}


def test_a_trial_is_marked_measuring_only_once_admitted_and_unanswered(tmp_path) -> None:
    """ATTR_MEASURING tells the fleet which running trials can no longer yield or answer:
    set when measuring begins, never on a trial answered from the study."""
    import time

    storage = make_storage(f"journal:{tmp_path / 'optuna.journal'}")
    before = time.time()
    StudyLoop(plan(trials=4), F.synthetic_runner(), storage, families=SMALL_FAMILIES).run()
    study = optuna.load_study(study_name="s", storage=storage)
    study.enqueue_trial(study.trials[1].params, skip_if_exists=False)  # asked again: the study answers
    StudyLoop(plan(trials=6), F.synthetic_runner(), storage, families=SMALL_FAMILIES).run()
    trials = study.get_trials()
    measured = [t for t in trials if ATTR_SOURCE not in t.user_attrs and t.value is not None]
    answered = [t for t in trials if ATTR_SOURCE in t.user_attrs]
    assert len(measured) == 6 and answered
    assert all(before <= t.user_attrs[ATTR_MEASURING] <= time.time() for t in measured)
    assert not any(ATTR_MEASURING in t.user_attrs for t in answered)


FAULTS = {
    Status.COMPILE_ERROR: Measurement.failed(Status.COMPILE_ERROR, "error: identifier undefined"),
    Status.LAUNCH_ERROR: Measurement.failed(Status.LAUNCH_ERROR, "too many resources requested for launch"),
    Status.WRONG_RESULT: Measurement.failed(Status.WRONG_RESULT, "max abs error 3.0 at (0,1,2)"),
    Status.TIMEOUT: Measurement.failed(Status.TIMEOUT, "kernel did not finish in 10 s; worker restarted"),
}


# One family per way of failing (FAULTY_FAMILIES), and a grid over the few families the grid
# tests need: the whole space's grid costs about a minute of bookkeeping per test on CI.
FAULTY_FAMILIES = {name: FAMILIES[name] for name in ("naive", "gather", "vec", "warp_per_head", "flat")}
GRID_FAMILIES = {name: FAMILIES[name] for name in ("naive", "gather", "flat")}


def faulty_bench(shape, dtype, config: Config) -> Measurement:
    """Every family but flat misbehaves in its own way (bulk and tile as vec does); flat
    raises (a crash)."""
    if config == BASELINE:
        return F.synthetic_bench(shape, dtype, config)
    planted = {
        "gather": Status.COMPILE_ERROR,
        "vec": Status.LAUNCH_ERROR,
        "bulk": Status.LAUNCH_ERROR,
        "tile": Status.LAUNCH_ERROR,
        "warp_per_head": Status.WRONG_RESULT,
        "naive": Status.TIMEOUT,
    }
    if config.family == "flat":
        raise RuntimeError("worker died: illegal memory access")
    return FAULTS[planted[config.family]]


def test_every_fault_is_a_row_with_its_status_and_infinite_time_and_the_study_goes_on(tmp_path) -> None:
    runner = BenchRunner(faulty_bench, F.IDENTITY, F.copy_ms)
    sink = ResultsSink(tmp_path, "h200", "run-f")
    outcome = StudyLoop(
        plan(sampler="grid"), runner, None, run_id="run-f", sink=sink, families=FAULTY_FAMILIES
    ).run()
    frame, _ = load_results(tmp_path)
    assert len(frame) == outcome.space_size  # all measured although most failed
    statuses = Counter(frame["status"])
    assert set(statuses) == {Status.OK, *FAILURES}
    assert statuses[Status.OK] == 1
    failed = frame[frame["status"] != Status.OK]
    assert failed["time_ms"].map(math.isinf).all()
    assert failed["ratio_to_copy"].map(math.isinf).all()
    crash = failed[failed["status"] == Status.CRASH]["message"].iloc[0]
    assert "illegal memory access" in crash
    assert outcome.failures[Status.CRASH] == statuses[Status.CRASH]
    assert outcome.best_value == pytest.approx(
        F.synthetic_ms(F.SMALL, BF16, BASELINE) / F.copy_ms(F.SMALL, BF16)
    )


def test_grid_measures_every_valid_config_once_whatever_the_trial_budget(tmp_path) -> None:
    runner = F.synthetic_runner()
    outcome = StudyLoop(plan(sampler="grid", trials=3), runner, None, families=GRID_FAMILIES).run()
    keys = [c.key for _, _, c in runner.calls]
    assert len(keys) == len(set(keys)) == outcome.space_size


def test_grid_lets_the_runner_compile_every_configuration_first() -> None:
    runner = F.RecordingRunner()
    outcome = StudyLoop(plan(sampler="grid"), runner, None, families=GRID_FAMILIES).run()
    assert len(runner.prepared) == 1
    assert {c.key for _, _, c in runner.prepared[0]} == {c.key for _, _, c in runner.calls}
    assert len(runner.prepared[0]) == outcome.space_size


def test_a_finished_study_measures_nothing_more(tmp_path) -> None:
    storage = make_storage(f"sqlite:///{tmp_path / 'o.db'}")
    StudyLoop(plan(trials=6), F.synthetic_runner(), storage).run()
    again = F.synthetic_runner()
    outcome = StudyLoop(plan(trials=6), again, storage).run()
    assert again.calls == []
    assert len(outcome.rows) == 6
    assert (outcome.ended, outcome.held, outcome.goal) == (BUDGET_MET, 6, 6)
    out = io.StringIO()
    render_outcomes([outcome], out)
    assert out.getvalue().endswith("the study already holds its 6 trials; a larger --trials asks for more\n")


def test_a_loop_says_why_it_ended() -> None:
    first = StudyLoop(plan(trials=6), F.synthetic_runner(), None).run()
    assert (first.ended, first.held, first.goal) == (BUDGET_MET, 0, 6)
    out = io.StringIO()
    render_outcomes([first], out)
    assert "6 measured" in out.getvalue()
    whole = StudyLoop(plan(trials=450), F.synthetic_runner(), None, families=SMALL_FAMILIES).run()
    assert whole.ended in (BUDGET_MET, EXHAUSTED)


@pytest.mark.parametrize("sampler", ["random", "qmc"])
def test_other_samplers_run_the_same_loop(sampler: str) -> None:
    pytest.importorskip("scipy") if sampler == "qmc" else None
    runner = F.synthetic_runner()
    StudyLoop(plan(sampler=sampler, trials=8), runner, None).run()
    assert len({c.key for _, _, c in runner.calls}) == len(runner.calls) == 8


SMALL_FAMILIES = {name: FAMILIES[name] for name in ("naive", "gather")}  # 42 configurations


def test_a_budget_beyond_the_space_measures_each_configuration_once_and_stops() -> None:
    runner = F.synthetic_runner()
    outcome = StudyLoop(plan(trials=450), runner, None, families=SMALL_FAMILIES).run()
    keys = [c.key for _, _, c in runner.calls]
    assert len(keys) == len(set(keys)) == outcome.space_size == 42
    # no trial spent on a repeat: one per configuration (llm.c's queued first included)
    assert outcome.trials == outcome.space_size and outcome.answered == 0 and outcome.invalid == 0


def test_a_proposal_already_measured_is_replaced_by_the_nearest_unseen_one() -> None:
    loop = StudyLoop(plan(trials=30), F.synthetic_runner(), None, families=SMALL_FAMILIES)
    outcome = loop.run()
    assert outcome.trials == 30 and len(outcome.measured) == 30
    sampler = loop.sampler
    seen = {k for k, _ in outcome.measured}
    unseen = [c for c in loop.space.configs if c.key not in seen]
    near = sampler.nearest(Config.of("gather", block=256, load="ldg", store="plain"), {}, unseen)
    if any(c.family == "gather" for c in unseen):
        assert near.family == "gather"


def test_a_row_another_worker_wrote_is_answered_not_measured_again(tmp_path) -> None:
    first = F.synthetic_runner()
    sink = ResultsSink(tmp_path, "h200", "dead-worker")
    lost = plan(trials=5, study_name="lost")
    StudyLoop(lost, first, None, run_id="dead-worker", sink=sink, families=GRID_FAMILIES).run()
    written = {c.key for _, _, c in first.calls}
    # A new study (the first one's trials never told: its worker died) over the same results
    # directory: every configuration it proposes is looked up in the store right before measuring.
    runner = F.synthetic_runner()
    mine = ResultsSink(tmp_path, "h200", "survivor")
    watch = StoreWatch(tmp_path, "h200", F.SMALL, BF16, own=lambda: mine.files)
    outcome = StudyLoop(
        plan(sampler="grid", study_name="retry"),
        runner,
        None,
        run_id="survivor",
        sink=mine,
        watch=watch,
        families=GRID_FAMILIES,
    ).run()
    measured = {c.key for _, _, c in runner.calls}
    assert measured.isdisjoint(written) and len(measured) + 5 == outcome.space_size
    assert outcome.answered == 5 and watch.reads >= 1
    frame, _ = load_results(tmp_path)
    assert frame["config_key"].is_unique


def test_the_budget_counts_running_trials_before_this_one() -> None:
    study = optuna.create_study()
    done = study.ask()
    claim(done, "a")
    record(done, {"status": "ok", "time_ms": 1.0, "copy_ms": 1.0})
    study.tell(done, 1.0)
    early, unclaimed, me = study.ask(), study.ask(), study.ask()
    claim(early, "b")
    claim(me, "c")
    snap = Snapshot.read(study)
    assert snap.slots_before(me.number) == (1, 3)  # a done; b and one not yet claimed before me
    assert snap.slots_before(early.number) == (1, 1)  # the first running trial waits for no one
    study.tell(unclaimed, state=optuna.trial.TrialState.PRUNED)
    assert Snapshot.read(study).slots_before(me.number) == (1, 2)


def test_a_worker_taken_for_dead_goes_on_and_its_row_answers_the_retry(tmp_path) -> None:
    storage = optuna.storages.InMemoryStorage()
    calls: list[str] = []

    def bench(shape, dtype, config):
        calls.append(config.key)
        if len(calls) == 3:  # another worker fails this trial meanwhile and queues it again
            study = optuna.load_study(study_name="s", storage=storage)
            (running,) = study.get_trials(states=(optuna.trial.TrialState.RUNNING,))
            storage.set_trial_state_values(running._trial_id, state=optuna.trial.TrialState.FAIL)
            optuna.storages.RetryHeartbeatStaleTrialCallback()(study, storage.get_trial(running._trial_id))
        return F.synthetic_bench(shape, dtype, config)

    sink = ResultsSink(tmp_path, "h200", "run")
    watch = StoreWatch(tmp_path, "h200", F.SMALL, BF16, own=lambda: [])  # reads its own file too
    outcome = StudyLoop(
        plan(trials=8),
        BenchRunner(bench, F.IDENTITY, F.copy_ms),
        storage,
        run_id="run",
        sink=sink,
        watch=watch,
    ).run()
    frame, _ = load_results(tmp_path)
    assert len(calls) == len(set(calls)) == 8 and frame["config_key"].is_unique and len(frame) == 8
    assert outcome.answered == 1  # the retried configuration, from the row on disk


def test_three_workers_with_a_budget_beyond_the_space_stop_when_it_is_exhausted(tmp_path) -> None:
    storage = optuna.storages.InMemoryStorage()
    runners = [F.synthetic_runner() for _ in range(3)]
    outcomes = []

    def work(i: int) -> None:
        loop = StudyLoop(
            plan(trials=450, seed=i),
            runners[i],
            storage,
            run_id=f"w{i}",
            sink=ResultsSink(tmp_path, "h200", f"w{i}"),
            families=SMALL_FAMILIES,
        )
        outcomes.append(loop.run())

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    frame, _ = load_results(tmp_path)
    assert len(frame) == 42 and frame["config_key"].is_unique  # the whole space, each once
    trials = len(optuna.load_study(study_name="s", storage=storage).trials)
    assert trials <= 42 + 6, trials  # a few yields at most, never a trial per repeat


def test_a_retry_whose_worker_still_lives_here_is_not_measured_a_second_time() -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        storage = optuna.storages.InMemoryStorage()
        study = optuna.create_study(study_name="s", storage=storage)
        loop = StudyLoop(plan(trials=3), F.synthetic_runner(), storage)
        params = loop.space.params_of(BASELINE)
        distributions = {
            k: optuna.distributions.CategoricalDistribution(v)
            for k, v in {FAMILY_PARAM: loop.space.family_names, **loop.space.offered}.items()
        }
        study.add_trial(
            optuna.trial.create_trial(
                state=optuna.trial.TrialState.WAITING,
                params=params,
                distributions={k: distributions[k] for k in params},
                user_attrs={WORKER: worker_id(sleeper.pid), ATTR_KEY: BASELINE.key},
                system_attrs={"failed_trial": 0},
            )
        )
        outcome = loop.run()
        first = study.trials[0]
        assert first.state == optuna.trial.TrialState.PRUNED and first.user_attrs[ATTR_STATUS] == "duplicate"
        assert outcome.yielded >= 1
    finally:
        sleeper.kill()
        sleeper.wait()


def test_another_workers_rows_answer_only_a_watch_timed_alike(tmp_path) -> None:
    """A file written before rows recorded their hold (no such column) answers a watch that
    times without one, and nothing to one that holds."""
    import pyarrow.parquet as pq

    sink = ResultsSink(tmp_path, "h200", "old")
    StudyLoop(plan(trials=3, study_name="old"), F.synthetic_runner(), None, run_id="old", sink=sink).run()
    (path,) = sink.files
    pq.write_table(pq.read_table(path).drop_columns(["hold_us"]), path)
    key = load_results(tmp_path)[0]["config_key"].iloc[0]
    assert StoreWatch(tmp_path, "h200", F.SMALL, BF16, hold_us=0.0).answer(key) is not None
    assert StoreWatch(tmp_path, "h200", F.SMALL, BF16).answer(key) is not None
    assert StoreWatch(tmp_path, "h200", F.SMALL, BF16, hold_us=150.0).answer(key) is None


def test_a_trial_its_killed_worker_never_stamped_holds_up_the_next_run_only_for_the_grace_period(
    tmp_path,
) -> None:
    import time

    from optuna.trial import TrialState

    storage = make_storage(f"journal:{tmp_path / 'optuna.journal'}", heartbeat_interval=1)
    study = optuna.create_study(study_name="s", storage=storage)
    orphan = study.ask()  # a worker killed between creating its trial and stamping it
    runner = F.synthetic_runner()
    # --heartbeat 1: a silent worker is taken for dead after 4 s, and so is an unstamped trial
    loop = StudyLoop(plan(trials=3), runner, storage, families=SMALL_FAMILIES, heartbeat_s=1, grace_s=4)
    start = time.monotonic()
    worker = threading.Thread(target=loop.run, daemon=True)
    worker.start()
    worker.join(timeout=40)
    elapsed = time.monotonic() - start
    if worker.is_alive():  # stalled on the orphan (it was failed only after a fixed 120 s)
        loop.stop.set()
        worker.join(timeout=60)
    assert elapsed < 40, f"the run waited {elapsed:.0f} s for an orphaned trial"
    assert len(runner.calls) == 3
    assert storage.get_trial(orphan._trial_id).state == TrialState.FAIL
    mine = [t for t in study.get_trials() if t.number != orphan.number]
    assert all(t.user_attrs.get(WORKER) == worker_id() for t in mine)  # stamped the moment asked


def test_trials_asked_ahead_are_stamped_and_kept_alive_so_a_short_grace_never_reaps_them(tmp_path) -> None:
    import time

    from optuna.trial import TrialState

    from tuner.study.liveness import reap

    def slow(shape, dtype, config):
        time.sleep(0.8)  # the last of a batch of 4 waits 2.4 s for its turn, past the grace period
        return F.synthetic_bench(shape, dtype, config)

    storage = make_storage(f"journal:{tmp_path / 'optuna.journal'}", heartbeat_interval=1)
    runner = F.synthetic_runner(slow)
    loop = StudyLoop(
        plan(trials=4, ahead=4), runner, storage, families=SMALL_FAMILIES, heartbeat_s=0.5, grace_s=1.5
    )
    study = optuna.create_study(
        study_name="s", storage=make_storage(f"journal:{tmp_path / 'optuna.journal'}")
    )
    reaped: list[int] = []
    worker = threading.Thread(target=loop.run, daemon=True)
    worker.start()
    while worker.is_alive():  # another worker of this host, looking for the dead
        reaped += reap(study, study.get_trials(states=(TrialState.RUNNING,)), grace_s=1.5)
        time.sleep(0.1)
    assert reaped == [] and len(runner.calls) == 4
