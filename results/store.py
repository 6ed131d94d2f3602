"""Parquet files of trial rows: atomic writes, a tolerant loader, schema upgrades.

Each run (and each worker of a fleet) writes its own file, `<run_id>.parquet`, so writers
never collide. A write goes to a hidden temporary name first and is then renamed over the
target (`os.replace` is atomic on POSIX), so a reader sees the old file or the new one,
never half of one. The temporary name says who writes it (`.tmp-<pid>@<host>@....parquet`):
a process killed while writing leaves it behind, and `clean_stale_temporaries` removes the
ones whose process no longer runs on this host.
"""

from __future__ import annotations

import logging
import math
import os
import re
import socket
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import platformdirs
import pyarrow as pa
import pyarrow.parquet as pq

from results.schema import COLUMNS, SCHEMA_VERSION, TRIAL_SCHEMA

log = logging.getLogger(__name__)

# Where results live. New rows go to the user's directory ($REPKV_RESULTS_DIR, else the
# platform's data directory: ~/.local/share/repkv-tune/results on Linux). The results bundled
# with the package (committed measurements from real GPUs, results/data) are read beside it,
# never written: by the service, by the Python API and by the tuner's de-duplication.
BUNDLED_RESULTS = Path(__file__).resolve().parent / "data"
APP_NAME = "repkv-tune"
TEMP_PREFIX = ".tmp-"
LEGACY_TEMP_AGE_S = 3600.0  # a temporary without a writer's name, older than this, is garbage
_HOST = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname()) or "host"
RUN_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class CorruptResults(ValueError):
    """A results file that cannot be read as trial rows."""


@dataclass
class LoadReport:
    """What a load read, and every file it had to skip (with why)."""

    files: list[Path] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


def user_results_dir() -> Path:
    """Where new results are written: $REPKV_RESULTS_DIR, else the platform's user data
    directory (it may not exist yet)."""
    configured = os.environ.get("REPKV_RESULTS_DIR")
    return Path(configured).expanduser() if configured else platform_results_dir()


def platform_results_dir() -> Path:
    """The platform's user data directory for results (~/.local/share/repkv-tune/results on
    Linux, honouring XDG_DATA_HOME)."""
    return platformdirs.user_data_path(APP_NAME, appauthor=False) / "results"


def bundled_results_dir() -> Path:
    """The results shipped inside the package: read-only."""
    return BUNDLED_RESULTS


def read_dirs(primary: Path | None = None, *, bundled: bool = True) -> list[Path]:
    """The directories a reader loads: `primary` (default: the user's directory), then the
    bundled store unless `bundled` is false or it is `primary` itself."""
    primary = Path(primary) if primary is not None else user_results_dir()
    dirs = [primary]
    if bundled and _resolved(bundled_results_dir()) != _resolved(primary):
        dirs.append(bundled_results_dir())
    return dirs


def _resolved(path: Path) -> Path:
    return Path(path).expanduser().resolve()


def write_table(rows: Iterable[Mapping[str, Any]] | pd.DataFrame, directory: Path, run_id: str) -> Path:
    """Write rows as `<directory>/<run_id>.parquet`, atomically, replacing any older copy."""
    if not RUN_ID_PATTERN.fullmatch(run_id):
        raise ValueError(f"run id {run_id!r} must be letters, digits, '.', '_' or '-'")
    frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    table = to_table(frame)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"{run_id}.parquet"
    fd, tmp = tempfile.mkstemp(prefix=temp_prefix(), suffix=".parquet", dir=directory)
    os.close(fd)
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it private; results are shared data
    try:
        pq.write_table(table, tmp, compression="zstd")
        os.replace(tmp, target)
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
    for name in COLUMNS:
        if name not in frame.columns:
            frame[name] = None
    frame["schema_version"] = SCHEMA_VERSION
    if "timestamp" in frame:
        frame["timestamp"] = pd.to_datetime(frame["timestamp"], utc=True)
    return pa.Table.from_pandas(frame[list(COLUMNS)], schema=TRIAL_SCHEMA, preserve_index=False)


def upgrade(table: pa.Table) -> pa.Table:
    """Bring a table written under any schema version to the current one.

    Version 1 is the first; a later version adds its conversion here. Columns this version
    does not know are dropped, and columns it adds are null-filled.
    """
    raw = (table.schema.metadata or {}).get(b"repkv_tune_schema_version", b"1")
    try:
        version = int(raw)
    except ValueError:
        raise CorruptResults(f"unreadable schema version {raw!r}") from None
    if version > SCHEMA_VERSION:
        raise CorruptResults(f"written by schema version {version}; this reader knows up to {SCHEMA_VERSION}")
    columns = []
    for f in TRIAL_SCHEMA:
        if f.name in table.column_names:
            try:
                columns.append(table.column(f.name).cast(f.type))
            except (pa.ArrowException, ValueError) as exc:
                raise CorruptResults(f"column {f.name!r} cannot be read as {f.type}: {exc}") from None
        elif f.nullable:
            columns.append(pa.nulls(table.num_rows, f.type))
        else:
            raise CorruptResults(f"required column {f.name!r} is missing")
    return pa.Table.from_arrays(columns, schema=TRIAL_SCHEMA)


def read_file(path: Path) -> pd.DataFrame:
    try:
        # One open, read whole: a path given to pyarrow may be opened more than once (schema,
        # then data) and a writer's os.replace in between would mix two versions.
        with open(path, "rb") as handle:
            data = handle.read()
        table = pq.read_table(pa.BufferReader(data))
    except (OSError, pa.ArrowException) as exc:
        raise CorruptResults(f"{path.name}: unreadable parquet ({exc})") from exc
    return upgrade(table).to_pandas()


def result_files(directory: Path) -> list[Path]:
    """The parquet files under directory, temporary ones left out."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    return sorted(
        p for p in directory.rglob("*.parquet") if p.is_file() and not p.name.startswith(TEMP_PREFIX)
    )


def results_files_of(directories: Path | Iterable[Path]) -> list[Path]:
    """result_files of each directory in turn, each file once."""
    if isinstance(directories, (str, os.PathLike)):
        directories = [Path(directories)]
    seen: set[Path] = set()
    files = []
    for directory in directories:
        for path in result_files(directory):
            if _resolved(path) not in seen:
                seen.add(_resolved(path))
                files.append(path)
    return files


def load_results(directories: Path | Iterable[Path]) -> tuple[pd.DataFrame, LoadReport]:
    """Every trial row under one directory or several (e.g. `read_dirs(...)`); directories
    that do not exist are skipped, and a file reached through two of them is read once.
    Unreadable files are skipped with a warning and listed in the report; no row of a
    readable file is ever dropped."""
    report = LoadReport()
    frames = []
    for path in results_files_of(directories):
        try:
            frame = read_file(path)
        except CorruptResults as exc:
            log.warning("skipping results file %s: %s", path, exc)
            report.skipped[str(path)] = str(exc)
            continue
        report.files.append(path)
        frames.append(frame)
    if not frames:
        return empty_frame(), report
    return pd.concat(frames, ignore_index=True), report


def empty_frame() -> pd.DataFrame:
    return TRIAL_SCHEMA.empty_table().to_pandas()


def is_finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)
