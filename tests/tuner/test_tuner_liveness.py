"""Which workers are dead, and what becomes of their trials."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import optuna
from optuna.trial import TrialState

from tuner.study.liveness import LEASE, WORKER, reap, worker_id
from tuner.study.storage import make_storage

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _dead_pid() -> int:
    return int(
        subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True).stdout
    )


def _running(study: optuna.Study, worker: str, lease: float | None = None) -> int:
    trial = study.ask()
    trial.suggest_categorical("family", ["a", "b"])
    trial.set_user_attr(WORKER, worker)
    if lease is not None:
        trial.set_user_attr(LEASE, lease)
    return trial.number


def test_on_the_journal_the_dead_are_known_by_pid_here_and_by_lease_elsewhere(tmp_path: Path) -> None:
    study = optuna.create_study(storage=make_storage(f"journal:{tmp_path / 'j.journal'}"), study_name="s")
    long_ago = time.time() - 3600
    starved = _running(study, worker_id(), lease=long_ago)  # alive here: a late lease is no death
    killed = _running(study, worker_id(_dead_pid()))
    remote_silent = _running(study, "elsewhere:123:456", lease=long_ago)
    remote_alive = _running(study, "elsewhere:124:456", lease=time.time())
    failed = reap(study, study.get_trials(states=(TrialState.RUNNING,)), grace_s=10)
    assert sorted(failed) == sorted([killed, remote_silent])
    states = {t.number: t.state for t in study.trials}
    assert states[starved] == states[remote_alive] == TrialState.RUNNING
    retried = [t for t in study.trials if t.state == TrialState.WAITING]
    assert sorted(t.system_attrs["failed_trial"] for t in retried) == sorted(failed)
    assert all(t.params for t in retried)  # queued again with the dead trial's configuration


def test_on_postgres_or_sqlite_optunas_heartbeat_judges(tmp_path: Path) -> None:
    study = optuna.create_study(storage=make_storage(f"sqlite:///{tmp_path / 'o.db'}"), study_name="s")
    _running(study, worker_id(_dead_pid()))  # no heartbeat recorded: not for reap to judge
    assert reap(study, study.get_trials(states=(TrialState.RUNNING,)), grace_s=10) == []


def test_a_trial_keeper_beats_optunas_heartbeat_on_rdb_and_writes_a_lease_elsewhere(tmp_path: Path) -> None:
    from tuner.study.liveness import TrialKeeper, uses_optuna_heartbeat

    rdb = optuna.create_study(storage=make_storage(f"sqlite:///{tmp_path / 'k.db'}"), study_name="k")
    journal = optuna.create_study(storage=make_storage(f"journal:{tmp_path / 'k.journal'}"), study_name="k")
    assert uses_optuna_heartbeat(rdb._storage) and not uses_optuna_heartbeat(journal._storage)
    for study in (rdb, journal):
        trial = study.ask()
        with TrialKeeper(study._storage, 0.2) as keeper:
            keeper.keep(trial._trial_id, worker_id())
            assert keeper.previous(trial._trial_id) is None  # it bore no stamp before
            time.sleep(0.5)
        attrs = study._storage.get_trial(trial._trial_id).user_attrs
        assert (LEASE in attrs) == (study is journal) and attrs[WORKER] == worker_id()
