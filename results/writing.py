"""Writing trial rows: each run (and each worker of a fleet) its own file, `<run_id>.parquet`,
so writers never collide; a write goes to a hidden temporary name first and is then renamed
over the target (`os.replace` is atomic on POSIX), so a reader sees the old file or the new
one, never half of one. The temporary name says who writes it (`.tmp-<pid>@<host>@....parquet`):
a process killed while writing leaves it behind, and `clean_stale_temporaries` removes the
ones whose process no longer runs on this host."""

from __future__ import annotations

import logging
import os
import re
import socket
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from results.listing import TEMP_PREFIX
from results.schema import COLUMNS, SCHEMA_VERSION, TRIAL_SCHEMA, ops_of

log = logging.getLogger("results.store")

LEGACY_TEMP_AGE_S = 3600.0  # a temporary without a writer's name, older than this, is garbage
_HOST = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname()) or "host"
RUN_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def write_table(rows: Iterable[Mapping[str, Any]] | pd.DataFrame, directory: Path, run_id: str) -> Path:
    """Write rows as `<directory>/<run_id>.parquet`, atomically, replacing any older copy."""
    frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    return write_arrow(to_table(frame), directory, run_id)


def write_arrow(table: pa.Table, directory: Path, run_id: str) -> Path:
    """Write a table of TRIAL_SCHEMA (`to_table`) as `<directory>/<run_id>.parquet`, atomically."""
    if not RUN_ID_PATTERN.fullmatch(run_id):
        raise ValueError(f"run id {run_id!r} must be letters, digits, '.', '_' or '-'")
    target = Path(directory) / f"{run_id}.parquet"
    return _replace_atomically(target, lambda tmp: pq.write_table(table, tmp, compression="zstd"))


def write_frame(frame: pd.DataFrame, path: Path) -> Path:
    """Any frame (a benchmark's rows, not trial rows) as the parquet file `path`, atomically:
    a reader, or a run killed mid-write, sees the old file or the new one."""
    return _replace_atomically(Path(path), lambda tmp: frame.to_parquet(tmp, index=False))


def write_parquet(table: pa.Table, path: Path, **options: Any) -> Path:
    """Any arrow table as the parquet file `path` (pyarrow's write options), atomically."""
    return _replace_atomically(Path(path), lambda tmp: pq.write_table(table, tmp, **options))


def write_text(text: str, path: Path) -> Path:
    """A text file (an exported header or table) as `path`, atomically, through a temporary of
    its own: concurrent writers of one path never share a temporary name."""
    return _replace_atomically(Path(path), lambda tmp: Path(tmp).write_text(text))


def _replace_atomically(target: Path, write: Callable[[str], object]) -> Path:
    """`write` a temporary file beside `target` (its directory made if need be), then rename it
    over `target`; the temporary is removed if anything fails. A symbolic link is written
    through (the file it names is replaced, the link kept), and a device or pipe (`-o
    /dev/null`) is written in place: renaming over it would put a regular file there."""
    real = Path(os.path.realpath(target))
    if real.exists() and not real.is_file() and not real.is_dir():
        write(str(real))
        return target
    real.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=temp_prefix(), suffix=real.suffix, dir=real.parent)
    os.close(fd)
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it private; results are shared data
    try:
        write(tmp)
        os.replace(tmp, real)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def temp_prefix(pid: int | None = None) -> str:
    return f"{TEMP_PREFIX}{os.getpid() if pid is None else pid}@{_HOST}@"


def _writer(name: str) -> tuple[int, str] | None:
    """(pid, host) of a temporary file's writer, from its name (None for older names)."""
    parts = name[len(TEMP_PREFIX) :].split("@")
    if len(parts) < 3 or not parts[0].isdigit():
        return None
    return int(parts[0]), parts[1]


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale_temporaries(directory: Path, *, now: float | None = None) -> list[Path]:
    """Remove the temporary files under directory left by writers that died: those named
    after a process of this host that no longer runs, and unnamed ones (older versions) more
    than an hour old. Temporaries of other hosts and of live processes are left alone.
    Returns what was removed."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    now = time.time() if now is None else now
    removed = []
    for path in directory.rglob(f"{TEMP_PREFIX}*.parquet"):
        writer = _writer(path.name)
        try:
            if writer is None:
                stale = now - path.stat().st_mtime > LEGACY_TEMP_AGE_S
            else:
                pid, host = writer
                stale = host == _HOST and pid != os.getpid() and not _running(pid)
            if stale:
                path.unlink()
                removed.append(path)
        except OSError:
            continue  # gone already, or not ours to remove
    if removed:
        log.info("removed %d temporary files of dead writers under %s", len(removed), directory)
    return removed


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def to_table(frame: pd.DataFrame) -> pa.Table:
    """Rows -> a table of exactly TRIAL_SCHEMA (missing optional columns become null)."""
    frame = frame.copy()
    frame["op"] = ops_of(frame)  # rows made without it are repkv backward's, as everywhere
    for name in COLUMNS:
        if name not in frame.columns:
            frame[name] = None
    frame["schema_version"] = SCHEMA_VERSION
    if "timestamp" in frame:
        frame["timestamp"] = pd.to_datetime(frame["timestamp"], utc=True)
    return pa.Table.from_pandas(frame[list(COLUMNS)], schema=TRIAL_SCHEMA, preserve_index=False)
