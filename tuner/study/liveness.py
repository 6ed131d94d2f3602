"""Which worker runs a trial, whether it is still alive, and what happens to the trials of
one that died.

Every trial a worker asks for is stamped with the worker's identity (`WORKER`:
host, pid and the process's start time, so that a reused pid is not taken for the dead
worker) the moment it exists (`TrialKeeper.keep`, right after `study.ask()`: the trials asked
ahead of their turn are stamped too), and kept alive by a `TrialKeeper` thread until it is told:

- RDB storages (PostgreSQL, SQLite): Optuna's own heartbeat (`record_heartbeat`); a trial
  whose heartbeat is older than the grace period is failed by `optuna.storages.
  fail_stale_trials`, which hands it to the storage's `RetryHeartbeatStaleTrialCallback`.
- Other storages (the journal file has no heartbeat): a lease, the user attribute
  `LEASE` rewritten every interval. `reap` fails a running trial whose worker is gone
  from this host (its pid no longer runs this process: on its own host a worker is judged
  by the process table alone, never by a late lease), or, for a worker of another host
  sharing the journal, whose lease is older than the grace period; and retries it the same
  way, with RetryHeartbeatStaleTrialCallback.

A trial that never got its worker stamp (a worker killed in the moment between creating the
trial and stamping it) is failed once it is older than the grace period, the same four
heartbeats that judge a silent worker (`--heartbeat`): no longer does such an orphan hold up
every worker for a fixed two minutes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import warnings
from collections.abc import Iterable, Iterator
from datetime import datetime

import optuna
from optuna.storages import BaseStorage, RetryHeartbeatStaleTrialCallback
from optuna.trial import FrozenTrial, TrialState

log = logging.getLogger(__name__)

WORKER = "worker"  # trial user attribute: "host:pid:start"
LEASE = "lease"  # trial user attribute: time.time() of the worker's last sign of life
MAX_RETRY = 3
_HOST = socket.gethostname()


def _stat(pid: int) -> list[str]:
    """The fields of /proc/<pid>/stat after the command name ([] where /proc cannot tell)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
        return stat.rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def process_start(pid: int) -> str:
    """The process's start time in clock ticks since boot ('' where /proc cannot tell)."""
    fields = _stat(pid)
    return fields[19] if len(fields) > 19 else ""


def worker_id(pid: int | None = None) -> str:
    pid = os.getpid() if pid is None else pid
    return f"{_HOST}:{pid}:{process_start(pid)}"


def pid_alive(pid: int, start: str = "") -> bool:
    """Whether process pid runs on this host (and is the one that started at `start`)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, someone else's
    fields = _stat(pid)
    if fields and fields[0] in ("Z", "X"):
        return False  # killed, not yet reaped by its parent
    if start:
        now = process_start(pid)
        return not now or now == start
    return True


def parse_worker(worker: str) -> tuple[str, int, str] | None:
    """(host, pid, start) of a WORKER attribute."""
    try:
        host, pid_text, start = worker.rsplit(":", 2)
        return host, int(pid_text), start
    except ValueError:
        return None


def worker_dead(worker: str) -> bool:
    """True only when the worker certainly died: it ran on this host and its process is gone."""
    parsed = parse_worker(worker)
    return parsed is not None and parsed[0] == _HOST and not pid_alive(parsed[1], parsed[2])


def worker_alive_here(worker: str) -> bool:
    """True only when the worker runs on this host and its process is alive."""
    parsed = parse_worker(worker)
    return parsed is not None and parsed[0] == _HOST and pid_alive(parsed[1], parsed[2])


def uses_optuna_heartbeat(storage: BaseStorage) -> bool:
    """Whether the storage keeps Optuna's heartbeat: an RDB storage made with an interval, as
    the study holds it (wrapped in Optuna's cache, which passes the heartbeat through)."""
    interval = getattr(storage, "get_heartbeat_interval", None)
    return callable(interval) and interval() is not None and hasattr(storage, "record_heartbeat")


class TrialKeeper:
    """This worker's trials from the moment each is asked (`keep`) until it is told (`release`):
    stamped with the worker, and kept visibly alive by a daemon thread (Optuna's heartbeat on
    an RDB storage, else a lease attribute) while the block `with TrialKeeper(...)` lasts."""

    def __init__(self, storage: BaseStorage, interval_s: float) -> None:
        self.storage = storage
        self.interval_s = max(0.2, float(interval_s))
        self._previous: dict[int, str | None] = {}  # trial id -> the stamp it bore when asked
        self._lock = threading.Lock()  # a trial released is never beaten again, even mid-round
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="trial-keeper", daemon=True)

    def __enter__(self) -> TrialKeeper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2.0)  # a beat stuck in the storage is left to die with us

    def keep(self, trial_id: int, worker: str) -> None:
        """Stamp a trial just asked with `worker` and keep it alive from now on (its sign of
        life first, so that a stamped trial always has one)."""
        previous = self.storage.get_trial(trial_id).user_attrs.get(WORKER)
        with self._lock:
            self._previous[trial_id] = None if previous is None else str(previous)
            self._beat(trial_id)
        self.storage.set_trial_user_attr(trial_id, WORKER, worker)

    def previous(self, trial_id: int) -> str | None:
        """The stamp the trial bore when asked: a retried trial's, the worker taken for dead."""
        return self._previous.get(trial_id)

    def held(self) -> list[int]:
        """The trials kept now."""
        with self._lock:
            return sorted(self._previous)

    def release(self, *trial_ids: int) -> None:
        """No more signs of life for these trials (before they are told)."""
        with self._lock:
            for trial_id in trial_ids:
                self._previous.pop(trial_id, None)

    def _beat(self, trial_id: int) -> None:
        with contextlib.suppress(Exception):  # a missed beat is retried; the grace period covers it
            if uses_optuna_heartbeat(self.storage):
                self.storage.record_heartbeat(trial_id)  # type: ignore[attr-defined]
            else:
                self.storage.set_trial_user_attr(trial_id, LEASE, time.time())

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            with self._lock:
                for trial_id in sorted(self._previous):
                    self._beat(trial_id)


@contextlib.contextmanager
def failed_meanwhile(number: int) -> Iterator[None]:
    """If another worker took this one for dead (no sign of life for the grace period), it
    failed trial `number` and queued its configuration again: telling the study then raises
    UpdateFinishedTrialError, which is logged and swallowed here. Whatever the trial measured
    is on disk already; the retry answers from it."""
    try:
        yield
    except optuna.exceptions.UpdateFinishedTrialError:
        log.warning("trial %d was failed by another worker meanwhile; going on", number)


def _dead(trial: FrozenTrial, grace_s: float, now: float, heartbeat: bool) -> bool:
    worker = trial.user_attrs.get(WORKER)
    if worker is None:  # its worker died between asking for it and stamping it
        start = trial.datetime_start
        return start is not None and (datetime.now() - start).total_seconds() > grace_s
    if heartbeat:
        return False  # Optuna's heartbeat judges them (fail_stale_trials)
    parsed = parse_worker(str(worker))
    if parsed is not None and parsed[0] == _HOST:
        # On this host the process table knows: a worker starved of CPU for longer than the
        # grace period is slow, not dead, and must not have its trial measured a second time.
        return not pid_alive(parsed[1], parsed[2])
    lease = trial.user_attrs.get(LEASE)
    return lease is not None and now - float(lease) > grace_s


def reap(
    study: optuna.Study,
    running: Iterable[FrozenTrial],
    grace_s: float,
    *,
    max_retry: int = MAX_RETRY,
) -> list[int]:
    """Fail the running trials whose worker died and queue their configurations again.
    Returns the numbers of the trials failed here. On an RDB storage with a heartbeat, Optuna's
    `fail_stale_trials` does it (for workers on any host), and those it failed are returned
    too, so that the caller reads the study again and sees their retries."""
    storage = study._storage
    heartbeat = uses_optuna_heartbeat(storage)
    running = list(running)
    failed = []
    if heartbeat:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            with contextlib.suppress(Exception):
                optuna.storages.fail_stale_trials(study)
        # which of them Optuna failed (and queued again): only a trial older than the grace
        # period can have been, so only those are looked up
        for trial in running:
            start = trial.datetime_start
            if start is not None and (datetime.now() - start).total_seconds() > grace_s:
                with contextlib.suppress(Exception):
                    if storage.get_trial(trial._trial_id).state == TrialState.FAIL:
                        failed.append(trial.number)
    now = time.time()
    for trial in running:
        if trial.state != TrialState.RUNNING or not _dead(trial, grace_s, now, heartbeat):
            continue
        try:
            if not storage.set_trial_state_values(trial._trial_id, state=TrialState.FAIL):
                continue
        except optuna.exceptions.UpdateFinishedTrialError:
            continue  # another worker got there first
        failed.append(trial.number)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            RetryHeartbeatStaleTrialCallback(max_retry=max_retry)(study, storage.get_trial(trial._trial_id))
    return failed
