"""Optuna storages from a URL: SQLite for one process, a journal file for several processes
on one host, PostgreSQL for a fleet.

    memory                          in-memory (nothing survives the process)
    sqlite:///results/optuna.db     one process (the default, beside the results)
    journal:/path/optuna.log        several processes on one host (JournalStorage, file backend)
    postgresql://user@host/db       several hosts (psycopg 3 is used for plain postgresql://)

RDB storages (SQLite, PostgreSQL, MySQL) record a heartbeat of every running trial; a trial
whose worker died goes stale after the grace period, is marked failed, and
`RetryHeartbeatStaleTrialCallback` puts its configuration back in the queue.
"""

from __future__ import annotations

import importlib.util
import random
import time
import warnings
from pathlib import Path

import optuna
import sqlalchemy.exc
from optuna.storages import BaseStorage, InMemoryStorage, RDBStorage, RetryHeartbeatStaleTrialCallback
from optuna.storages.journal import JournalFileBackend, JournalStorage

HEARTBEAT_INTERVAL_S = 30
GRACE_PERIOD_S = 120
MAX_RETRY = 3
CREATE_ATTEMPTS = 5


class InvalidStorage(ValueError):
    """A storage URL this tuner cannot open."""


def default_storage_url(results_dir: Path) -> str:
    return f"sqlite:///{Path(results_dir).resolve() / 'optuna.db'}"


def normalize_url(url: str) -> str:
    """postgresql:// means psycopg 3 here (SQLAlchemy would look for psycopg2)."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix) and importlib.util.find_spec("psycopg") is not None:
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def has_heartbeat(storage: BaseStorage) -> bool:
    return isinstance(storage, RDBStorage) and storage.heartbeat_interval is not None


def make_storage(
    url: str | None,
    *,
    heartbeat_interval: int = HEARTBEAT_INTERVAL_S,
    grace_period: int = GRACE_PERIOD_S,
) -> BaseStorage:
    if url is None or url in ("memory", ":memory:"):
        return InMemoryStorage()
    if url.startswith("journal:"):
        path = Path(url[len("journal:") :]).expanduser()
        if not path.name:
            raise InvalidStorage(f"journal storage {url!r} needs a file: journal:/path/optuna.log")
        path.parent.mkdir(parents=True, exist_ok=True)
        return JournalStorage(JournalFileBackend(str(path)))
    if "://" not in url:
        raise InvalidStorage(
            f"cannot read storage {url!r}: use sqlite:///FILE, journal:FILE, postgresql://... or memory"
        )
    url = normalize_url(url)
    engine_kwargs = {}
    if url.startswith("sqlite:///"):
        Path(url[len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
        engine_kwargs = {"connect_args": {"timeout": 60}}
    elif url.startswith("postgresql"):
        engine_kwargs = {"pool_pre_ping": True}
    for attempt in range(CREATE_ATTEMPTS):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            try:
                return RDBStorage(
                    url,
                    engine_kwargs=engine_kwargs,
                    heartbeat_interval=heartbeat_interval,
                    grace_period=grace_period,
                    heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=MAX_RETRY),
                )
            except ImportError as exc:
                raise InvalidStorage(f"cannot open {url.split('://')[0]} storage: {exc}") from exc
            except sqlalchemy.exc.SQLAlchemyError:
                # Workers starting together on a fresh database race to create Optuna's
                # tables; the loser retries and finds them made.
                if attempt == CREATE_ATTEMPTS - 1:
                    raise
                time.sleep(0.2 + random.random())
    raise AssertionError("unreachable")
