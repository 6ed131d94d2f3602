"""The results store as the running service sees it: the latest StoreIndex, rebuilt by a
background thread whenever the parquet files of its directories change (the results
directory, and beside it the results bundled with the package).

Requests only read `current` (one attribute load); a reload builds a whole new index and
swaps it in, so an answer never sees half of two loads. Nothing here writes to the
results directory.

A reload reads only the files that changed (by mtime and size); the others keep the rows
read last time. A file that was good and then turns unreadable in place, or whose every row
now fails validation, keeps being served from its last good copy until it is fixed or
removed; /readyz says so.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import variants
from results.index import StoreIndex, build_index
from results.leave_one_out import rule_quality_by_gpu
from results.listing import list_results
from results.store import FileRows, LoadReport, concat_tables, distinct_rows, load_file

log = logging.getLogger(__name__)

# (path, mtime in ns, size) of every parquet file, then (path, -1, -1) of every entry named
# *.parquet that is not a file (results.listing): what a reload depends on.
Signature = tuple[tuple[str, int, int], ...]
NOT_A_FILE = (-1, -1)


def scan(directories: Path | Sequence[Path]) -> tuple[Signature, dict[str, str]]:
    """The directories' signature, and the entries named *.parquet that are not files (why)."""
    listing = list_results(directories)
    entries = []
    for path in listing.files:
        try:
            stat = path.stat()
        except OSError:  # removed between listing and stat
            continue
        entries.append((str(path), stat.st_mtime_ns, stat.st_size))
    entries += [(name, *NOT_A_FILE) for name in listing.skipped]
    return tuple(entries), listing.skipped


def directory_signature(directories: Path | Sequence[Path]) -> Signature:
    return scan(directories)[0]


@dataclass
class LoadState:
    index: StoreIndex
    signature: Signature
    generation: int
    load_seconds: float


@dataclass(frozen=True)
class GoodCopy:
    """The last version of a file whose rows could be served, and when it was read."""

    rows: FileRows
    read_at: datetime


@dataclass
class ResultsStore:
    directory: Path  # the results directory; files are reported relative to it
    interval: float = 5.0
    clock: Callable[[], float] = time.monotonic
    beside: Sequence[Path] = ()  # read after it, e.g. the bundled results
    families: Collection[str] | None = None  # the families rows may name (default: variants')
    _state: LoadState | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    # the last load of each file, with the (mtime, size) it was read at
    _loaded: dict[str, tuple[tuple[int, int], FileRows]] = field(default_factory=dict)
    _good: dict[str, GoodCopy] = field(default_factory=dict)
    missing: tuple[str, ...] = ()  # directories that do not exist (checked on every poll)
    last_error: str | None = None

    @property
    def directories(self) -> list[Path]:
        return [Path(self.directory), *map(Path, self.beside)]

    @property
    def state(self) -> LoadState | None:
        return self._state

    @property
    def ready(self) -> bool:
        return self._state is not None

    def check_directories(self) -> tuple[str, ...]:
        """Note (and log, when it changes) which directories do not exist."""
        missing = tuple(str(d) for d in self.directories if not d.is_dir())
        for directory in missing:
            if directory not in self.missing:
                log.warning(
                    "results directory %s does not exist: nothing is served from it until it is created",
                    directory,
                )
        for directory in self.missing:
            if directory not in missing:
                log.info("results directory %s now exists", directory)
        self.missing = missing
        return missing

    def refresh(self, force: bool = False) -> bool:
        """Reload if the directory changed since the last load (or if forced: then every file
        is read again). True if reloaded."""
        with self._lock:
            missing = self.check_directories()
            signature, not_files = scan(self.directories)
            if not force and self._state is not None and signature == self._state.signature:
                return False
            started = self.clock()
            report = LoadReport(missing=list(missing), skipped=dict(not_files))
            for name, why in not_files.items():
                log.warning("skipping %s: %s", name, why)
            tables = []
            loaded: dict[str, tuple[tuple[int, int], FileRows]] = {}
            good: dict[str, GoodCopy] = {}
            now = datetime.now(timezone.utc)
            for name, mtime, size in signature:
                stamp = (mtime, size)
                if stamp == NOT_A_FILE:
                    continue
                previous = self._loaded.get(name)
                if previous is not None and previous[0] == stamp and not force:
                    rows = previous[1]
                else:
                    rows = load_file(Path(name), self.families)
                loaded[name] = (stamp, rows)
                if rows.error is not None:
                    report.skipped[name] = rows.error
                if rows.dropped:
                    report.dropped[name] = rows.dropped
                if rows.usable:
                    kept = self._good.get(name)
                    good[name] = kept if kept is not None and kept.rows is rows else GoodCopy(rows, now)
                else:
                    copy = self._good.get(name)
                    if copy is None:
                        continue
                    good[name] = copy
                    why = "unreadable" if rows.error is not None else "every row of it fails validation"
                    report.stale[name] = (
                        f"{why} since it last changed; serving its last good copy "
                        f"({copy.rows.table.num_rows} rows, read {copy.read_at:%Y-%m-%d %H:%M:%S} UTC) "
                        "until it is fixed or removed"
                    )
                    log.warning("results file %s is %s: serving its last good copy", name, why)
                    rows = copy.rows
                report.files.append(Path(name))
                tables.append(rows.table)
            self._loaded, self._good = loaded, good
            table, report.duplicate_rows = distinct_rows(concat_tables(tables))
            frame = table.to_pandas()
            index = build_index(frame, report, table=table)
            for op in variants.OPS:  # every op's index and leave-one-out, here, off the request path
                rule_quality_by_gpu(index.for_op(op))
            generation = 1 if self._state is None else self._state.generation + 1
            gc.unfreeze()
            self._state = LoadState(index, signature, generation, self.clock() - started)
            # The index is long-lived and never changes: keep the collector from rescanning its
            # objects on every full collection (a pause of milliseconds at 100k trials).
            gc.collect()
            gc.freeze()
            log.info(
                "loaded %d trial rows from %d files in %.2f s "
                "(%d files skipped, %d rows dropped, %d stale, %d duplicate rows counted once)",
                len(frame),
                len(report.files),
                self._state.load_seconds,
                len(report.skipped),
                report.dropped_rows,
                len(report.stale),
                report.duplicate_rows,
            )
            return True

    def _poll(self) -> None:
        while True:
            try:
                self.refresh()
                self.last_error = None
            except Exception as exc:  # keep serving the last good index
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.exception("reloading results from %s failed", ", ".join(map(str, self.directories)))
            if self._stop.wait(self.interval):
                return

    def start(self) -> None:
        """Load in the background now, then check for changes every `interval` seconds."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._poll, name="results-reloader", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def wait_ready(self, timeout: float = 30.0) -> bool:
        deadline = time.monotonic() + timeout
        while not self.ready and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.ready
