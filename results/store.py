"""Parquet files of trial rows: atomic writes, a tolerant loader, schema upgrades.

Each run (and each worker of a fleet) writes its own file, `<run_id>.parquet`, so writers
never collide. A write goes to a hidden temporary name first and is then renamed over the
target (`os.replace` is atomic on POSIX), so a reader sees the old file or the new one,
never half of one. The temporary name says who writes it (`.tmp-<pid>@<host>@....parquet`):
a process killed while writing leaves it behind, and `clean_stale_temporaries` removes the
ones whose process no longer runs on this host.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import platformdirs
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import variants
from results.cells import json_object_or_none
from results.listing import TEMP_PREFIX as TEMP_PREFIX  # the listing's, re-exported
from results.listing import list_results, resolved
from results.listing import missing_directories as missing_directories  # the listing's, re-exported
from results.listing import result_files as result_files
from results.listing import results_files_of as results_files_of
from results.schema import ROW_IDENTITY, SCHEMA_VERSION, TRIAL_SCHEMA
from results.validate import MAX_BANDWIDTH as MAX_BANDWIDTH  # where readers have found it
from results.validate import validate_table
from results.writing import RUN_ID_PATTERN as RUN_ID_PATTERN  # the writers', re-exported
from results.writing import clean_stale_temporaries as clean_stale_temporaries
from results.writing import temp_prefix as temp_prefix
from results.writing import to_table as to_table
from results.writing import write_arrow as write_arrow
from results.writing import write_frame as write_frame
from results.writing import write_table as write_table
from variants.errors import RepkvTuneError

log = logging.getLogger(__name__)

# Where results live. New rows go to the user's directory ($REPKV_RESULTS_DIR, else the
# platform's data directory: ~/.local/share/repkv-tune/results on Linux). The results bundled
# with the package (committed measurements from real GPUs, results/data) are read beside it,
# never written: by the service, by the Python API and by the tuner's de-duplication.
BUNDLED_RESULTS = Path(__file__).resolve().parent / "data"
APP_NAME = "repkv-tune"


class CorruptResults(RepkvTuneError, ValueError):
    """A results file that cannot be read as trial rows."""


@dataclass
class LoadReport:
    """What a load read, every file it had to skip and every row it dropped (with why)."""

    files: list[Path] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # file -> why it could not be read
    dropped: dict[str, dict[str, int]] = field(default_factory=dict)  # file -> reason -> rows
    stale: dict[str, str] = field(default_factory=dict)  # file -> why its last good copy is served
    missing: list[str] = field(default_factory=list)  # directories that do not exist
    duplicate_rows: int = 0  # rows read more than once (the same trial in two files), counted once

    @property
    def dropped_rows(self) -> int:
        return sum(sum(reasons.values()) for reasons in self.dropped.values())


@dataclass
class FileRows:
    """One results file as loaded: its valid rows, or why it could not be read."""

    path: Path
    table: pa.Table | None  # the rows that passed validation; None if unreadable
    error: str | None = None
    dropped: dict[str, int] = field(default_factory=dict)  # reason -> rows
    rows_read: int = 0

    @property
    def usable(self) -> bool:
        """Read, and not every row of it dropped (a file rewritten in place by a broken tool)."""
        return self.table is not None and (self.table.num_rows > 0 or self.rows_read == 0)


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
    if bundled and resolved(bundled_results_dir()) != resolved(primary):
        dirs.append(bundled_results_dir())
    return dirs


def upgrade(table: pa.Table) -> pa.Table:
    """Bring a table written under any schema version to the current one.

    Version 1 is the first; a later version adds its conversion here (2: `op`, which version 1
    rows lack, is repkv_backward). Columns this version does not know are dropped, and the
    nullable columns it adds are null-filled.
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
        if f.name == "op" and f.name not in table.column_names and version < 2:
            # version 1 knew one op
            columns.append(pa.array([variants.DEFAULT_OP] * table.num_rows, f.type))
        elif f.name in table.column_names:
            try:
                columns.append(table.column(f.name).cast(f.type))
            except (pa.ArrowException, ValueError) as exc:
                raise CorruptResults(f"column {f.name!r} cannot be read as {f.type}: {exc}") from None
        elif f.nullable:
            columns.append(pa.nulls(table.num_rows, f.type))
        else:
            raise CorruptResults(f"required column {f.name!r} is missing")
    return pa.Table.from_arrays(columns, schema=TRIAL_SCHEMA)


@functools.lru_cache(maxsize=1 << 16)  # a store repeats each configuration across its files
def _completed(family: str, params: str | None) -> tuple[str, str] | None:
    """The `params` and `config_key` of a row of grown family `family` written before its newer
    parameters, or None where the row names them all (or validation drops it)."""
    values = json_object_or_none(params)
    if values is None:
        return None
    completed = variants.FAMILIES[family].completed(values)
    if completed == values:
        return None
    return json.dumps(completed, sort_keys=True), variants.Config.of(family, **completed).key


def complete_params(table: pa.Table) -> pa.Table:
    """Rows of a family that gained parameters since they were written, with those parameters
    at the values they ran with (`Family.completed`) in `params` and `config_key`, so that every
    reader (index, claims, replay, dashboards) sees the configuration as the space names it."""
    grown = [name for name, f in variants.FAMILIES.items() if f.completed({}) != {}]
    if not grown or table.num_rows == 0:
        return table
    # the grown families are repkv backward's (variants.FAMILIES)
    of_op = pc.equal(table.column("op"), variants.DEFAULT_OP)
    mask = pc.fill_null(pc.and_(of_op, pc.is_in(table.column("family"), pa.array(grown))), False)
    mask = mask.to_numpy(zero_copy_only=False)
    if not mask.any():
        return table
    families = table.column("family").to_pylist()
    params = table.column("params").to_pylist()
    keys = table.column("config_key").to_pylist()
    changed = False
    for i in np.flatnonzero(mask):
        done = _completed(families[i], params[i])
        if done is not None:
            params[i], keys[i] = done
            changed = True
    if not changed:
        return table
    for name, values in (("params", params), ("config_key", keys)):
        field = table.schema.field(name)
        table = table.set_column(table.schema.get_field_index(name), field, pa.array(values, field.type))
    return table


def read_table(path: Path) -> pa.Table:
    """One file's rows as a table of TRIAL_SCHEMA (upgraded, parameters completed, not validated)."""
    try:
        # One open, read whole: a path given to pyarrow may be opened more than once (schema,
        # then data) and a writer's os.replace in between would mix two versions.
        with open(path, "rb") as handle:
            data = handle.read()
        table = pq.ParquetFile(pa.BufferReader(data)).read()  # a third quicker than pq.read_table
    except (OSError, pa.ArrowException) as exc:
        raise CorruptResults(f"unreadable parquet ({exc})") from exc  # the reader names the file
    return complete_params(upgrade(table))


def read_file(path: Path) -> pd.DataFrame:
    """One file's rows as a DataFrame, upgraded (and its parameters completed) but not
    validated: every row as written (what a merge copies). Readers that use the rows go through
    `load_file` or `load_results`."""
    return read_table(path).to_pandas()


def load_file(path: Path, families: Collection[str] | None = None) -> FileRows:
    """Read and validate one results file; never raises for bad contents."""
    path = Path(path)
    try:
        table = read_table(path)
    except CorruptResults as exc:
        log.warning("skipping results file %s: %s", path, exc)
        return FileRows(path, None, error=str(exc))
    valid, dropped = validate_table(table, families)
    if dropped:
        log.warning(
            "dropping %d of %d rows of results file %s: %s",
            table.num_rows - valid.num_rows,
            table.num_rows,
            path,
            "; ".join(f"{why}: {count}" for why, count in dropped.items()),
        )
    return FileRows(path, valid, dropped=dropped, rows_read=table.num_rows)


def concat_tables(tables: Iterable[pa.Table]) -> pa.Table:
    """The rows of every table in turn (no copy), or an empty table of TRIAL_SCHEMA."""
    tables = list(tables)
    return pa.concat_tables(tables) if tables else TRIAL_SCHEMA.empty_table()


def distinct_rows(table: pa.Table) -> tuple[pa.Table, int]:
    """`table` with each trial once (its first row kept, the order kept), and how many rows
    were left out: rows that share `ROW_IDENTITY` are one trial read twice. Every reader that
    gathers files goes through here, and `tuner merge` adds a row only where its identity is
    new."""
    n = table.num_rows
    if n < 2:
        return table, 0
    numbered = table.select(list(ROW_IDENTITY)).append_column("_row", pa.array(np.arange(n)))
    first = numbered.group_by(list(ROW_IDENTITY), use_threads=False).aggregate([("_row", "min")])
    if first.num_rows == n:
        return table, 0
    keep = np.zeros(n, dtype=bool)
    keep[first.column("_row_min").to_numpy()] = True
    return table.filter(pa.array(keep)), int(n - first.num_rows)


def load_table(
    directories: Path | Iterable[Path], families: Collection[str] | None = None
) -> tuple[pa.Table, LoadReport]:
    """Every valid trial row under one directory or several (e.g. `read_dirs(...)`), as one
    table, each row once (`distinct_rows`); directories that do not exist are skipped (and
    listed in the report), and a file reached through two of them is read once. Unreadable
    files and entries that are not files are skipped with a warning, and rows that fail
    `validate_table` are dropped with one; the report lists them with why."""
    directories = [Path(directories)] if isinstance(directories, (str, os.PathLike)) else list(directories)
    report = LoadReport(missing=[str(d) for d in missing_directories(directories)])
    listing = list_results(directories)
    for name, why in listing.skipped.items():
        log.warning("skipping %s: %s", name, why)
        report.skipped[name] = why
    tables = []
    for path in listing.files:
        loaded = load_file(path, families)
        if loaded.error is not None:
            report.skipped[str(path)] = loaded.error
            continue
        if loaded.dropped:
            report.dropped[str(path)] = loaded.dropped
        report.files.append(path)
        tables.append(loaded.table)
    table, report.duplicate_rows = distinct_rows(concat_tables(tables))
    return table, report


def load_results(
    directories: Path | Iterable[Path], families: Collection[str] | None = None
) -> tuple[pd.DataFrame, LoadReport]:
    """`load_table`, as a DataFrame."""
    table, report = load_table(directories, families)
    return table.to_pandas(), report


def empty_frame() -> pd.DataFrame:
    return TRIAL_SCHEMA.empty_table().to_pandas()


def is_finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)
