"""`python -m tuner merge DIR... -o OUT`: the results of several directories in one.

Fleet workers on hosts without a shared filesystem each write their own results directory;
merging gathers them (the service can also read several directories as they are). Every
trial row of the sources lands in OUT once: a row is identified by who measured what, and
when (`results.schema.ROW_IDENTITY`, as every reader de-duplicates), so merging the same
directory twice, or a directory that already holds an earlier merge, adds nothing. Each
source file is written under its own name (`<gpu>/<run_id>.parquet`); where OUT already has a
file of that name (an earlier merge of a run that has grown since), the new rows are added to
it. A source that is one GPU's directory (`R/h200`) has its files written under that GPU's
name all the same (`OUT/h200/<run_id>.parquet`). Every write is atomic (temporary name, then
rename), so a service reading OUT meanwhile never sees half a file. Unreadable source files
are skipped and reported, and so are rows no reader would use: a required value unset (a null
time_ms) or a number out of bounds (a negative time, an invalid shape;
`results.validate.writable_rows`); the sources are never changed.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pyarrow as pa

from results.listing import list_results
from results.schema import ROW_IDENTITY
from results.store import (
    CorruptResults,
    clean_stale_temporaries,
    read_table,
    result_files,
    write_table,
)
from results.validate import writable_rows


@dataclass
class MergeReport:
    files_written: list[Path] = field(default_factory=list)
    rows_added: int = 0
    rows_present: int = 0  # rows the target (or an earlier source) already held
    skipped: dict[str, str] = field(default_factory=dict)  # unreadable source file -> why
    dropped: dict[str, dict[str, int]] = field(default_factory=dict)  # file -> reason -> rows left out


def row_ids(frame: pd.DataFrame) -> pd.Series:
    """Each row's identity (`ROW_IDENTITY`, the rule every reader de-duplicates by), hashed."""
    return pd.util.hash_pandas_object(frame[list(ROW_IDENTITY)].astype(str), index=False)


def _read(path: Path, report: MergeReport) -> pd.DataFrame | None:
    """A file's rows that can be written again (every required value set), or None if it
    cannot be read; what is left out goes in the report."""
    try:
        table = read_table(path)
    except CorruptResults as exc:
        report.skipped[str(path)] = str(exc)
        return None
    whole, reasons = writable_rows(table)
    if reasons:
        report.dropped[str(path)] = reasons
        table = table.filter(pa.array(whole))
    return table.to_pandas()


def _place(rel: Path, frame: pd.DataFrame) -> Path:
    """Where a source file goes under the target: its path under the source, put under
    `<gpu>/` when it lies at the source's top (a source that is one GPU's directory, R/h200)
    and its rows name one GPU."""
    if rel.parent != Path(".") or "gpu" not in frame.columns:
        return rel
    gpus = frame["gpu"].dropna().unique()
    return Path(str(gpus[0])) / rel if len(gpus) == 1 else rel


def merge(sources: list[Path], target: Path) -> MergeReport:
    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    clean_stale_temporaries(target)
    report = MergeReport()
    resolved_target = target.resolve()
    present: set[int] = set()
    existing: dict[Path, pd.DataFrame] = {}
    for path in result_files(target):
        frame = _read(path, report)
        if frame is None:
            continue
        existing[path.relative_to(target)] = frame
        present.update(row_ids(frame))
    for source in sources:
        source = Path(source)
        if source.resolve() == resolved_target:  # its rows are all there already
            report.rows_present += sum(len(frame) for frame in existing.values())
            continue
        listing = list_results(source)
        report.skipped.update(listing.skipped)  # a dangling link, a directory named *.parquet, ...
        for path in listing.files:
            frame = _read(path, report)
            if frame is None:
                continue
            ids = row_ids(frame)
            new = ~ids.isin(present) & ~ids.duplicated()
            report.rows_present += int((~new).sum())
            if not new.any():
                continue
            rel = _place(path.relative_to(source), frame)
            rows = frame[new.to_numpy()]
            if rel in existing:
                rows = pd.concat([existing[rel], rows], ignore_index=True)
            name = rel.name[: -len(".parquet")]
            written = write_table(rows, target / rel.parent, name)
            existing[rel] = rows
            present.update(ids[new])
            report.rows_added += int(new.sum())
            if written not in report.files_written:
                report.files_written.append(written)
    return report


def run_merge(sources: list[Path], target: Path) -> int:
    missing = [s for s in sources if not Path(s).is_dir()]
    if missing:
        print(f"error: no directory {missing[0]}", file=sys.stderr)
        return 2
    if Path(target).exists() and not Path(target).is_dir():
        print(f"error: -o {target} is not a directory: give a directory to write", file=sys.stderr)
        return 2
    inside = [s for s in sources if Path(s).resolve() in Path(target).resolve().parents]
    if inside:  # every reader of the source (best, the service) would then see each row twice
        print(
            f"error: -o {target} is inside {inside[0]}, a directory merged: its rows would then be "
            f"read twice from {inside[0]}; give a directory outside it",
            file=sys.stderr,
        )
        return 2
    try:
        report = merge(sources, target)
    except OSError as exc:
        print(f"error: cannot write {exc.filename or target}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    for path, why in report.skipped.items():
        print(f"skipped {path}: {why}", file=sys.stderr)
    for path, reasons in report.dropped.items():
        counts = "; ".join(f"{why}: {n}" for why, n in reasons.items())
        print(f"{path}: {sum(reasons.values())} rows left out ({counts})", file=sys.stderr)
    print(
        f"{report.rows_added} rows added to {target} in {len(report.files_written)} files; "
        f"{report.rows_present} already there"
    )
    return 1 if report.skipped else 0
