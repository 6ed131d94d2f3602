"""Storages: the journal file by default; SQLite refused to a second process."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest
from optuna.storages import JournalStorage

from tuner.study.journal import journal_storage
from tuner.study.storage import InvalidStorage, default_storage_url, make_storage

ROOT = Path(__file__).resolve().parents[2]


def test_the_default_storage_is_a_journal_file_several_processes_can_share(tmp_path: Path) -> None:
    url = default_storage_url(tmp_path)
    assert url == f"journal:{tmp_path.resolve() / 'optuna.journal'}"
    assert isinstance(make_storage(url), JournalStorage)


def test_sqlite_in_use_by_another_process_is_refused_with_what_to_use_instead(tmp_path: Path) -> None:
    db = tmp_path / "optuna.db"
    make_storage(f"sqlite:///{db}")
    make_storage(f"sqlite:///{db}")  # the same process again: fine
    code = f"from tuner.study.storage import make_storage; make_storage('sqlite:///{db}')"
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0
    assert f"is in use by pid {os.getpid()}" in proc.stderr
    assert (
        f"journal:{tmp_path.resolve() / 'optuna.journal'}" in proc.stderr and "postgresql://" in proc.stderr
    )


def test_a_held_sqlite_lock_is_refused_in_process_too(tmp_path: Path) -> None:
    db = tmp_path / "other.db"
    fd = os.open(f"{db}.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        with pytest.raises(InvalidStorage, match="SQLite serves one process"):
            make_storage(f"sqlite:///{db}")
    finally:
        os.close(fd)


def test_sqlite_in_a_directory_that_does_not_exist_is_refused_and_nothing_is_made(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for url in ("sqlite:///typo/dir/optuna.db", f"sqlite:///{tmp_path}/typo/dir/optuna.db"):
        with pytest.raises(InvalidStorage, match=r"the directory .*typo/dir does not exist: correct"):
            make_storage(url)
    assert list(tmp_path.iterdir()) == []  # no directory, no database, no lock
    (tmp_path / "there").mkdir()
    make_storage("sqlite:///there/optuna.db")  # a new database in a directory that exists
    assert (tmp_path / "there" / "optuna.db").is_file()


@pytest.mark.parametrize("fragment", [b'{"op_code":4,"worker_id":"cut', b"x" * 200_000])
def test_a_line_cut_by_a_killed_writer_is_dropped_by_the_next_append(tmp_path: Path, fragment: bytes) -> None:
    """The fragment a writer killed mid-line leaves was glued to the next append's first line,
    and the journal, one bad line followed by more, could no longer be read."""
    import optuna

    path = tmp_path / "optuna.journal"
    study = optuna.create_study(study_name="s", storage=journal_storage(path))
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    with path.open("ab") as f:
        f.write(fragment)
    again = optuna.load_study(study_name="s", storage=journal_storage(path))
    again.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    fresh = optuna.load_study(study_name="s", storage=journal_storage(path))
    assert [t.state for t in fresh.trials] == [optuna.trial.TrialState.COMPLETE] * 4
    assert fragment not in path.read_bytes()


@pytest.mark.parametrize("where", ["last", "middle"])
def test_a_journal_line_that_is_no_log_record_is_refused_naming_it_and_left_as_it_is(
    tmp_path: Path, where: str
) -> None:
    """A bad line followed by more was Optuna's JSONDecodeError traceback; a bad last line was
    skipped by Optuna, until the run's first append put a line after it and made it fatal."""
    import optuna

    path = tmp_path / "optuna.journal"
    study = optuna.create_study(study_name="s", storage=journal_storage(path))
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    lines = path.read_bytes().splitlines(keepends=True)
    at = len(lines) if where == "last" else 2
    path.write_bytes(b"".join([*lines[:at], b"not a record {{\n", *lines[at:]]))
    before = path.read_bytes()
    with pytest.raises(InvalidStorage, match=f"{path} cannot be read: line {at + 1} is not one of Optuna"):
        make_storage(f"journal:{path}")
    assert path.read_bytes() == before


def test_a_damaged_sqlite_database_is_refused_in_one_line(tmp_path: Path, monkeypatch) -> None:
    """A file with SQLite's header and junk after it ended the run in SQLAlchemy's traceback
    ('database disk image is malformed') once the retries for racing workers ran out."""
    from tuner.study import storage

    monkeypatch.setattr(storage.time, "sleep", lambda _s: None)
    db = tmp_path / "optuna.db"
    db.write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 20)
    with pytest.raises(InvalidStorage) as caught:
        make_storage(f"sqlite:///{db}")
    reasons = ("database disk image is malformed", "file is not a database")
    assert str(caught.value) in [f"cannot keep the study in sqlite:///{db}: {why}" for why in reasons]
