"""Optuna storages from a URL: a journal file for the processes of one host, PostgreSQL for
a fleet of hosts, SQLite for one process.

    memory                          in-memory (nothing survives the process)
    journal:/path/optuna.journal    the processes of one host (JournalStorage, file backend with
                                    a flock, tuner.study.journal; the default: <results>/optuna.journal)
    postgresql://user@host/db       several hosts (psycopg 3 is used for plain postgresql://)
    sqlite:///path/optuna.db        one process only

RDB storages (PostgreSQL, SQLite, MySQL) record Optuna's heartbeat of every running trial; a
trial whose worker died goes stale after the grace period, is marked failed, and
`RetryHeartbeatStaleTrialCallback` puts its configuration back in the queue. The journal
has no heartbeat: `tuner.study.liveness` does the same from the worker's pid and a lease.

SQLite is refused in a directory that does not exist (a typo would start a new, empty study),
and when another process has the same database open through this function:
several processes on one SQLite file lock each other out of writes, and a worker stuck in
a commit held up everyone (a Ctrl-C even hung in one). The refusal says what to use instead.
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
import random
import socket
import time
import warnings
from pathlib import Path

import optuna
import sqlalchemy.exc
from optuna.storages import BaseStorage, InMemoryStorage, RDBStorage, RetryHeartbeatStaleTrialCallback

from tuner.study.journal import CorruptJournal, journal_storage
from variants.errors import RepkvTuneError

HEARTBEAT_INTERVAL_S = 30
MAX_RETRY = 3
CREATE_ATTEMPTS = 5


class InvalidStorage(RepkvTuneError, ValueError):
    """A storage URL this tuner cannot open."""


def default_storage_url(results_dir: Path) -> str:
    return f"journal:{Path(results_dir).resolve() / 'optuna.journal'}"


class SqliteInUse(InvalidStorage):
    """Another process has the SQLite database open."""


_SQLITE_LOCKS: dict[str, int] = {}  # database path -> the fd holding its lock in this process


def claim_sqlite(path: Path) -> None:
    """Hold `<db>.lock` for this process (released when it exits); SqliteInUse when another
    process holds it."""
    key = str(Path(path).resolve())
    if key in _SQLITE_LOCKS:
        return
    lock = Path(key + ".lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "another process"
        os.close(fd)
        journal = Path(key).with_name("optuna.journal")
        raise SqliteInUse(
            f"sqlite:///{key} is in use by {holder}: SQLite serves one process; share a study between "
            f"the processes of one host with --storage journal:{journal} (the default), "
            "or between hosts with --storage postgresql://..."
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
    _SQLITE_LOCKS[key] = fd


def sqlite_file(url: str) -> Path | None:
    """The database file of a sqlite:/// URL (None: in memory, or not a SQLite URL)."""
    scheme, _, rest = url.partition(":///")
    if not scheme.startswith("sqlite") or not rest:
        return None
    name = rest.split("?", 1)[0]
    return None if name in ("", ":memory:") else Path(name).expanduser()


def open_sqlite(db: Path, url: str) -> None:
    """Refuses a database whose directory does not exist (a typo in it would silently start a
    new, empty study) and one another process has open (`claim_sqlite`); holds its lock."""
    if not db.parent.is_dir():
        raise InvalidStorage(
            f"{url}: the directory {db.parent} does not exist: correct the path, or make the "
            "directory first (a new SQLite database is made only in an existing directory)"
        )
    claim_sqlite(db)


def normalize_url(url: str) -> str:
    """postgresql:// means psycopg 3 here (SQLAlchemy would look for psycopg2)."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix) and importlib.util.find_spec("psycopg") is not None:
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def shown_url(url: str) -> str:
    """The URL without its password."""
    try:
        return sqlalchemy.engine.make_url(url).render_as_string(hide_password=True)
    except sqlalchemy.exc.ArgumentError:
        return url.split("://", 1)[0] + "://..."


def database_words(exc: sqlalchemy.exc.SQLAlchemyError) -> str:
    """The database's own words (SQLAlchemy adds the statement and a link on further lines)."""
    orig = getattr(exc, "orig", None)
    lines = (str(orig) if orig is not None else str(exc)).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def make_storage(
    url: str | None,
    *,
    heartbeat_interval: float = HEARTBEAT_INTERVAL_S,
    grace_period: float | None = None,
) -> BaseStorage:
    """The storage a URL names. `heartbeat_interval` (seconds) and `grace_period` (default
    four intervals) are Optuna's heartbeat on RDB storages."""
    heartbeat_interval = max(1, round(heartbeat_interval))
    grace_period = max(heartbeat_interval + 1, round(grace_period or 4 * heartbeat_interval))
    if url is None or url in ("memory", ":memory:"):
        return InMemoryStorage()
    if url.startswith("journal:"):
        path = Path(url[len("journal:") :]).expanduser()
        if not path.name:
            raise InvalidStorage(f"journal storage {url!r} needs a file: journal:/path/optuna.log")
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            return journal_storage(path)
        except CorruptJournal as exc:
            raise InvalidStorage(str(exc)) from None
    if "://" not in url:
        raise InvalidStorage(
            f"cannot read storage {url!r}: use sqlite:///FILE, journal:FILE, postgresql://... or memory"
        )
    url = normalize_url(url)
    engine_kwargs = {}
    if url.startswith("sqlite:///"):
        db = sqlite_file(url)
        if db is not None:
            open_sqlite(db, url)
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
            except sqlalchemy.exc.SQLAlchemyError as exc:
                # Workers starting together on a fresh database race to create Optuna's
                # tables; the loser retries and finds them made.
                if attempt == CREATE_ATTEMPTS - 1:  # not a race: a damaged database, say
                    reason = database_words(exc)
                    raise InvalidStorage(f"cannot keep the study in {shown_url(url)}: {reason}") from None
                time.sleep(0.2 + random.random())
    raise AssertionError("unreachable")
