"""The results directory as other workers write it, read again right before each measurement.

A fleet's workers write their own files into one results directory (`<results>/<gpu>/
<run_id>.parquet`, each rewritten atomically after every trial). `StoreWatch.answer(key)`
says whether any of them holds a row for the configuration: it lists the GPU's directory,
reads again only the files whose size or mtime changed since the last look (and never this
process's own files, whose rows it already has), and keeps the answers for one GPU, shape,
dtype and kernel source (`stored_answers`). The cost is a directory listing and a stat per
file, plus one read per file another worker rewrote since.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from results.store import TEMP_PREFIX, CorruptResults, read_file
from tuner.claims import stored_answers
from variants import DType, Family, Shape

log = logging.getLogger(__name__)


class StoreWatch:
    def __init__(
        self,
        directory: Path,
        gpu: str,
        shape: Shape,
        dtype: DType,
        families: Mapping[str, Family] | None = None,
        *,
        own: Callable[[], list[Path]] = list,
    ) -> None:
        self.directory = Path(directory) / gpu
        self.gpu, self.shape, self.dtype, self.families = gpu, shape, dtype, families
        self.own = own  # this process's files (never re-read)
        self._seen: dict[str, tuple[int, int]] = {}
        self._answers: dict[str, dict[str, dict[str, Any]]] = {}  # file -> key -> row
        self.reads = 0

    def _changed(self) -> list[Path]:
        try:
            entries = list(os.scandir(self.directory))
        except OSError:
            return []
        own = {str(Path(p)) for p in self.own()}
        changed = []
        for entry in entries:
            name = entry.name
            if not name.endswith(".parquet") or name.startswith(TEMP_PREFIX) or entry.path in own:
                continue
            try:
                stat = entry.stat()
            except OSError:
                continue
            signature = (stat.st_mtime_ns, stat.st_size)
            if self._seen.get(entry.path) != signature:
                self._seen[entry.path] = signature
                changed.append(Path(entry.path))
        return changed

    def refresh(self) -> None:
        for path in self._changed():
            try:
                frame = read_file(path)
            except CorruptResults as exc:
                log.warning("skipping results file %s: %s", path, exc)
                continue
            self.reads += 1
            self._answers[str(path)] = stored_answers(frame, self.gpu, self.shape, self.dtype, self.families)

    def answer(self, key: str) -> dict[str, Any] | None:
        """The stored row that answers key, from any other worker's file, read now."""
        self.refresh()
        rows = [answers[key] for answers in self._answers.values() if key in answers]
        if not rows:
            return None
        if len(rows) == 1:
            return rows[0]
        # measured more than once already (before this rule held): the same pick as the store's
        return next(
            iter(stored_answers(pd.DataFrame(rows), self.gpu, self.shape, self.dtype, self.families).values())
        )
