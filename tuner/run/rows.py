"""Trial rows: built by one function, written to the results store by one sink.

A row is a plain dict with the columns of `results.schema.TRIAL_SCHEMA`.
"""

from __future__ import annotations

import json
import math
import os
import re
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from results.schema import SCHEMA_VERSION, Status
from results.store import to_table, write_arrow
from tuner import __version__
from tuner.runners.runner import GpuIdentity, Measurement
from variants import Config, DType, Family, Shape, get_family, op_of


@dataclass(frozen=True)
class StudyInfo:
    """The search that asked for a trial."""

    gpu: str  # the label results are filed under
    run_id: str
    study: str = ""
    sampler: str = ""
    seed: int | None = None
    trial: int | None = None


def utc_stamp(now: float | None = None) -> str:
    """'20250101T120000': a run id's time, UTC."""
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime(time.time() if now is None else now))


_ISSUED: set[str] = set()
_ISSUED_LOCK = threading.Lock()


def new_run_id(now: float | None = None) -> str:
    """UTC time, host and pid ('20250101T120000-host-1234'); a second run of the same process in
    the same second gets '-2', '-3', ... (its rows go to `<run_id>.parquet`, which the first
    run's must not share)."""
    stamp = utc_stamp(now)
    host = re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname())[:40].strip("-") or "host"
    base = f"{stamp}-{host}-{os.getpid()}"
    with _ISSUED_LOCK:
        run_id, n = base, 1
        while run_id in _ISSUED:
            n += 1
            run_id = f"{base}-{n}"
        _ISSUED.add(run_id)
    return run_id


def objective_value(row: Mapping[str, Any]) -> float:
    """What the study minimizes: time over the same-run copy (inf for every failure)."""
    ratio = row.get("ratio_to_copy")
    if row.get("status") != Status.OK or ratio is None or not math.isfinite(ratio):
        return math.inf
    return float(ratio)


def trial_row(
    identity: GpuIdentity,
    shape: Shape,
    dtype: DType,
    config: Config,
    measurement: Measurement,
    copy_ms: float,
    info: StudyInfo,
    families: Mapping[str, Family] | None = None,
) -> dict[str, Any]:
    """One trial as a row of TRIAL_SCHEMA (of the op its family belongs to: `families` names
    the op's, default repkv backward's)."""
    family = get_family(config.family, dict(families) if families is not None else None)
    op = op_of(family)
    launch = family.geometry(shape, dtype, config, identity.sm_count)
    ok = measurement.status == Status.OK and math.isfinite(measurement.time_ms)
    time_ms = measurement.time_ms if ok else math.inf
    moved = op.bytes_moved(shape, dtype)
    return {
        "schema_version": SCHEMA_VERSION,
        "gpu": info.gpu,
        "gpu_name": identity.name,
        "compute_capability": identity.compute_capability,
        "sm_count": identity.sm_count,
        "driver_version": identity.driver_version,
        "cuda_version": identity.cuda_version,
        "cupy_version": identity.cupy_version,
        "host": identity.host,
        "op": op.name,
        **shape.as_dict(),
        "dtype": dtype.name,
        "family": config.family,
        "params": json.dumps(config.values, sort_keys=True),
        "config_key": config.key,
        "name_expression": family.name_expression(shape, dtype, config),
        "source_hash": family.source_hash,
        "grid": launch.grid,
        "block": launch.block,
        "status": measurement.status.value,  # a plain string in the row
        "message": measurement.message,
        "time_ms": time_ms,
        "p20_ms": measurement.p20_ms if ok else math.inf,
        "p80_ms": measurement.p80_ms if ok else math.inf,
        "reps": measurement.reps,
        "bytes_moved": moved,
        "gbps": moved / (time_ms * 1e-3) / 1e9 if ok and time_ms > 0 else None,
        "copy_ms": copy_ms,
        "ratio_to_copy": time_ms / copy_ms if ok and copy_ms > 0 else math.inf,
        "copy_method": identity.copy_method,
        "empty_launch_ms": identity.empty_launch_ms,
        "hold_us": identity.hold_us,
        "l2": identity.l2,
        "study": info.study,
        "sampler": info.sampler,
        "seed": info.seed,
        "trial": info.trial,
        "run_id": info.run_id,
        "timestamp": datetime.now(timezone.utc),
        "tuner_version": __version__,
    }


class ResultsSink:
    """Collects this run's rows and writes them to `<results>/<gpu>/<run_id>.parquet`.

    Every `flush_every` rows (default: every row) the file is rewritten atomically, so an
    interrupted run loses at most the trials since the last flush. A file holds at most
    `part_rows` rows; a long run (a grid) continues in `<run_id>.1.parquet`, ... so that a
    flush never rewrites more than one part.
    """

    def __init__(
        self, directory: Path, gpu: str, run_id: str, *, flush_every: int = 1, part_rows: int = 2000
    ) -> None:
        self.root = Path(directory)
        self.directory = self.root / gpu
        self.run_id = run_id
        self.flush_every = max(1, flush_every)
        self.part_rows = max(1, part_rows)
        self.rows: list[dict[str, Any]] = []  # every row of this run
        self.files: list[Path] = []
        self._part_start = 0
        self._part = 0
        self._unflushed = 0
        self._table: pa.Table | None = None  # the current part, as written last
        self._table_end = 0

    def append(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        self._unflushed += 1
        if self._unflushed >= self.flush_every:
            self.flush()

    def _name(self) -> str:
        return self.run_id if self._part == 0 else f"{self.run_id}.{self._part}"

    def flush(self) -> None:
        if not self._unflushed:
            return
        while len(self.rows) - self._part_start > self.part_rows:
            end = self._part_start + self.part_rows
            self._write(end)
            self._part_start = end
            self._part += 1
            self._table, self._table_end = None, end
        self._write(len(self.rows))
        self._unflushed = 0

    def _write(self, end: int) -> None:
        """Write the current part's rows up to `end`: only the rows new since the last write
        are converted to arrow (a trial's flush costs one row, not the whole part, to build)."""
        start = self._part_start if self._table is None else self._table_end
        new = to_table(pd.DataFrame(self.rows[start:end])) if end > start else None
        if self._table is None:
            self._table = new
        elif new is not None:
            # one chunk per column: parquet writes a table of one chunk a row 30x slower
            self._table = pa.concat_tables([self._table, new]).combine_chunks()
        self._table_end = end
        path = write_arrow(self._table, self.directory, self._name())
        if path not in self.files:
            self.files.append(path)

    def close(self) -> None:
        self.flush()
