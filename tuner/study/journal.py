"""The journal file the processes of one host share a study through: Optuna's JournalStorage
on its file backend, with a lock made for one host.

Optuna's own file locks are made for NFS: a symlink (or an O_EXCL file) taken in a loop whose
sleep doubles on every failed try, up to a second, and broken by force after a grace period
when its holder died. Between workers that each append a dozen lines per trial, the loser
of a collision slept tens of milliseconds more each time, and two workers on two GPUs tuned
no faster than one (measured on two H200s: 0.97x). Here the lock is `flock(2)`: a waiter
wakes as soon as the holder lets go, and the kernel releases the lock of a process that dies,
so a SIGKILLed worker never leaves a stale lock behind.

A writer killed in the middle of a line (a partial `write(2)`) leaves a fragment without its
newline. Optuna reads past such a last line, but the next append would glue its first line to
it, and a bad line followed by more makes the whole journal unreadable: an append therefore
first cuts a fragment it finds at the end (never read by anyone, so nothing is lost).

Lines are appended without an fsync each, as the results' parquet files are written: a
process killed at any moment loses nothing it appended (the page cache holds it), and what
a power cut could take back is only the study's last trials, whose rows answer them when the
study runs again. Several hosts share a study through PostgreSQL, not this file.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

from optuna.storages.journal import JournalFileBackend, JournalStorage


class FlockLock:
    """An exclusive flock on `<journal>.flock`, blocking until it is free. (Optuna's own lock
    on the same journal would not exclude it: share a journal through this tuner only.)"""

    def __init__(self, journal: str) -> None:
        self._path = journal + ".flock"
        self._fd: int | None = None

    def acquire(self) -> bool:
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return True

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            raise RuntimeError("the journal lock is not held")
        os.close(fd)  # closing the descriptor releases the flock


class JournalFile(JournalFileBackend):
    """Optuna's journal file backend, appending under `FlockLock` without an fsync per line."""

    def __init__(self, path: str) -> None:
        super().__init__(path)  # its reading; its appending (and its lock) are replaced below
        self._path = path
        self._journal_lock = FlockLock(path)

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        data = ("\n".join(json.dumps(log, separators=(",", ":")) for log in logs) + "\n").encode()
        self._journal_lock.acquire()
        try:
            fd = os.open(self._path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
            try:
                _cut_fragment(fd)
                view = memoryview(data)
                while view:  # whole lines, appended under the lock
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
        finally:
            self._journal_lock.release()


def _cut_fragment(fd: int) -> None:
    """Truncate the file after its last newline, if a line without one follows it."""
    end = os.fstat(fd).st_size
    if end == 0 or os.pread(fd, 1, end - 1) == b"\n":
        return
    os.ftruncate(fd, _line_start(fd, end))


def _line_start(fd: int, end: int, chunk: int = 1 << 16) -> int:
    """The offset just after the last newline before `end` (0 where there is none), read
    backwards a chunk at a time: a journal's tail, never the whole of it."""
    position = end
    while position > 0:
        start = max(0, position - chunk)
        newline = os.pread(fd, position - start, start).rfind(b"\n")
        if newline >= 0:
            return start + newline + 1
        position = start
    return 0


class CorruptJournal(ValueError):
    """A journal with a complete line that is not one of Optuna's log records: Optuna cannot
    read one followed by more lines, and skips one that is last, until the next append puts a
    line after it."""

    def __init__(self, path: Path | str, line: int | None) -> None:
        where = f"line {line}" if line is not None else "a line"
        super().__init__(
            f"the Optuna journal {path} cannot be read: {where} is not one of Optuna's log records; "
            "move the journal away (the rows its trials wrote stay in the results and answer them), or give "
            "--storage another file"
        )


def _is_record(line: bytes) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def _bad_line(path: Path | str) -> int | None:
    """The number (from 1) of the first complete line that is not a JSON object, or None. A
    fragment after the last newline, left by a writer killed mid-line, is not counted: the next
    append cuts it."""
    try:
        lines = Path(path).read_bytes().split(b"\n")[:-1]
    except OSError:
        return None
    return next((number for number, line in enumerate(lines, start=1) if not _is_record(line)), None)


def _last_line_is_record(path: Path | str) -> bool:
    """Whether the last complete line is a log record (true where there is none): only the
    journal's tail is read, since Optuna has just read the whole of it."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return True
    try:
        end = _line_start(fd, os.fstat(fd).st_size)  # the fragment's start: complete lines end there
        if end == 0:
            return True
        start = _line_start(fd, end - 1)
        return _is_record(os.pread(fd, end - 1 - start, start))
    finally:
        os.close(fd)


def journal_storage(path: Path | str) -> JournalStorage:
    """The study storage kept in the journal `path`; CorruptJournal, naming the line, where a
    line of it is not a log record (rather than Optuna's JSONDecodeError, or an append that
    makes a skipped last line unreadable)."""
    try:
        storage = JournalStorage(JournalFile(str(path)))
    except ValueError:
        raise CorruptJournal(path, _bad_line(path)) from None
    if not _last_line_is_record(path):  # the first bad line is the last one: the rest read
        raise CorruptJournal(path, _bad_line(path))
    return storage
