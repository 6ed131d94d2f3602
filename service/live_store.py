"""The results store as the running service sees it: the latest StoreIndex, rebuilt by a
background thread whenever the parquet files of its directories change (the results
directory, and beside it the results bundled with the package).

Requests only read `current` (one attribute load); a reload builds a whole new index and
swaps it in, so an answer never sees half of two loads. Nothing here writes to the
results directory.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from results.index import StoreIndex, build_index
from results.store import load_results, results_files_of

log = logging.getLogger(__name__)

# (path, mtime in ns, size) of every parquet file: what a reload depends on.
Signature = tuple[tuple[str, int, int], ...]


def directory_signature(directories: Path | Sequence[Path]) -> Signature:
    entries = []
    for path in results_files_of(directories):
        try:
            stat = path.stat()
        except OSError:  # removed between listing and stat
            continue
        entries.append((str(path), stat.st_mtime_ns, stat.st_size))
    return tuple(entries)


@dataclass
class LoadState:
    index: StoreIndex
    signature: Signature
    generation: int
    load_seconds: float


@dataclass
class ResultsStore:
    directory: Path  # the results directory; files are reported relative to it
    interval: float = 5.0
    clock: Callable[[], float] = time.monotonic
    beside: Sequence[Path] = ()  # read after it, e.g. the bundled results
    _state: LoadState | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
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

    def refresh(self, force: bool = False) -> bool:
        """Reload if the directory changed since the last load (or if forced). True if reloaded."""
        with self._lock:
            signature = directory_signature(self.directories)
            if not force and self._state is not None and signature == self._state.signature:
                return False
            started = self.clock()
            frame, report = load_results(self.directories)
            index = build_index(frame, report)
            generation = 1 if self._state is None else self._state.generation + 1
            gc.unfreeze()
            self._state = LoadState(index, signature, generation, self.clock() - started)
            # The index is long-lived and never changes: keep the collector from rescanning its
            # objects on every full collection (a pause of milliseconds at 100k trials).
            gc.collect()
            gc.freeze()
            log.info(
                "loaded %d trial rows from %d files in %.2f s (%d skipped)",
                len(frame),
                len(report.files),
                self._state.load_seconds,
                len(report.skipped),
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
