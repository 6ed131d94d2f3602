"""The results directory as other workers write it, read again right before each measurement.

A fleet's workers write their own files into one results directory (`<results>/<gpu>/
<run_id>.parquet`, each rewritten atomically after every trial). `StoreWatch.answer(key)`
says whether any of them holds a row for the configuration: it lists the GPU's directory,
reads again only the files whose size or mtime changed since the last look (and never this
process's own files, whose rows it already has), and of those only the columns that say
which configurations of this GPU, shape, dtype and kernel source they hold. The cost is a
directory listing and a stat per file, plus a read of a few columns per file another worker
rewrote since; a whole file is read only when it holds the configuration asked about.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from results.schema import SHAPE_COLUMNS
from results.store import TEMP_PREFIX, CorruptResults, read_file
from tuner.study.claims import answering_rows, stored_answers
from variants import DType, Family, Shape

KEY_COLUMNS = (
    "gpu",
    *SHAPE_COLUMNS,
    "dtype",
    "family",
    "source_hash",
    "config_key",
    "study",
    "hold_us",
    "l2",
)
# files written before these lack them (read as 0 and cold)
OPTIONAL_KEY_COLUMNS = frozenset({"hold_us", "l2"})

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
        hold_us: float | None = None,
        l2: str | None = None,
    ) -> None:
        self.directory = Path(directory) / gpu
        self.gpu, self.shape, self.dtype, self.families = gpu, shape, dtype, families
        self.hold_us = hold_us  # only rows timed alike answer (None: any)
        self.l2 = l2
        self.own = own  # this process's files (never re-read)
        self._seen: dict[str, tuple[int, int]] = {}
        self._keys: dict[str, set[str]] = {}  # file -> the configurations it answers
        self._studies: dict[str, dict[str, set[str]]] = {}  # file -> study -> its configurations
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
        """Read again the configuration keys of the files that changed: only the columns that
        say which GPU, shape, dtype and kernel source a row is of (a whole row is read only
        for a configuration asked about that a file holds)."""
        for path in self._changed():
            try:
                self._keys[str(path)], self._studies[str(path)] = self._keys_of(path)
            except (OSError, pa.ArrowException, KeyError, CorruptResults) as exc:
                log.warning("skipping results file %s: %s", path, exc)
                self._keys.pop(str(path), None)
                self._studies.pop(str(path), None)
                continue
            self.reads += 1

    def _keys_of(self, path: Path) -> tuple[set[str], dict[str, set[str]]]:
        with open(path, "rb") as handle:  # one read: a writer's os.replace cannot mix versions
            data = handle.read()
        parquet = pq.ParquetFile(pa.BufferReader(data))
        present = set(parquet.schema_arrow.names)
        lacking = [c for c in KEY_COLUMNS if c not in present and c not in OPTIONAL_KEY_COLUMNS]
        if lacking:  # not a file of trial rows (as results.store says of it)
            raise CorruptResults(f"required column {lacking[0]!r} is missing")
        columns = [c for c in KEY_COLUMNS if c in present or c not in OPTIONAL_KEY_COLUMNS]
        frame = parquet.read(columns=columns).to_pandas()
        rows = answering_rows(frame, self.gpu, self.shape, self.dtype, self.families, self.hold_us, self.l2)
        studies = {str(study): set(group["config_key"]) for study, group in rows.groupby("study")}
        return set(rows["config_key"]), studies

    def study_keys(self, study: str) -> set[str]:
        """The configurations that rows of study `study` hold in other workers' files, read now:
        measured by the study even where its trial was never told (a worker killed between
        writing its row and telling Optuna), so they count against the study's budget."""
        self.refresh()
        return {key for studies in self._studies.values() for key in studies.get(study, ())}

    def answer(self, key: str) -> dict[str, Any] | None:
        """The stored row that answers key, from any other worker's file, read now."""
        self.refresh()
        frames = []
        for name, keys in self._keys.items():
            if key in keys:
                try:
                    frames.append(read_file(Path(name)))
                except CorruptResults as exc:
                    log.warning("skipping results file %s: %s", name, exc)
        if not frames:
            return None
        frame = pd.concat(frames, ignore_index=True)
        frame = frame[frame["config_key"] == key]
        answers = stored_answers(
            frame, self.gpu, self.shape, self.dtype, self.families, self.hold_us, self.l2
        )
        return answers.get(key)
