"""A race's measurements as trial rows of their own run, written to a results directory.

Each process that records gets one run per GPU label, `race-<gpu>-<UTC time>-<pid>`, in
`<directory>/<gpu>/<run_id>.parquet` (the layout the tuner writes); every race of the process
adds its rows and the file is rewritten atomically (`results.store.write_table`). A row holds
only what the race measured: the candidate's median, p20 and p80 over the race's samples and
their count, the device copy of the same bytes timed the same way (or nothing where that copy
was not timed), and the device's identity. Candidates whose output was checked and found
wrong are recorded as `wrong_result`; other failures measured nothing and are not recorded.

Recording never raises: the first failure (to read the device, build the rows or write the
file) is logged as a warning, later ones at debug level, and the caller goes on.
"""

from __future__ import annotations

import logging
import math
import os
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from results.schema import Status
from results.store import write_table
from tuner.run.rows import StudyInfo, trial_row, utc_stamp
from tuner.runners.race import RaceResult, Timed
from tuner.runners.runner import GpuIdentity, Measurement
from variants import Config, DType, Family, Shape
from variants.errors import RepkvTuneError

log = logging.getLogger(__name__)

RACE_STUDY = "race"  # the study and sampler columns of a race's rows
RUN_ID_PREFIX = "race-"

C = TypeVar("C")
Row = dict[str, Any]


class WrongResult(RepkvTuneError, RuntimeError):
    """A candidate's output failed validation against the reference: it must not be served,
    and its row says wrong_result."""


def race_run_id(gpu: str, now: float | None = None, pid: int | None = None) -> str:
    """'race-h200-20250101T120000-1234': the GPU label, UTC time and pid of the recording process."""
    stamp = utc_stamp(now)
    label = re.sub(r"[^A-Za-z0-9._-]", "-", gpu)[:64] or "gpu"
    return f"{RUN_ID_PREFIX}{label}-{stamp}-{os.getpid() if pid is None else pid}"


def timed_measurement(timed: Timed[Any]) -> Measurement:
    """An ok measurement from a race's samples: median, p20 and p80 as the tuner's timer
    computes them (numpy's linear interpolation), and how many samples."""
    p20, median, p80 = np.percentile(np.asarray(timed.samples, dtype=float), [20, 50, 80])
    return Measurement(
        status=Status.OK,
        time_ms=float(median),
        p20_ms=float(p20),
        p80_ms=float(p80),
        reps=len(timed.samples),
    )


def race_rows(
    result: RaceResult[C],
    config_of: Callable[[C], Config],
    *,
    identity: GpuIdentity,
    gpu: str,
    shape: Shape,
    dtype: DType,
    copy_ms: float | None,
    run_id: str,
    families: Mapping[str, Family] | None = None,
) -> list[Row]:
    """The rows of one race, in shortlist order: one per timed candidate (status ok) and one
    per candidate that failed with WrongResult. `copy_ms` is the device copy of half the
    op's bytes timed in the same race (None: not timed; the row's copy_ms and, for an ok
    row, ratio_to_copy are then left empty). `families`: the op's (default repkv backward's)."""
    measured: list[tuple[int, C, Measurement]] = [
        (t.position, t.candidate, timed_measurement(t)) for t in result.timed
    ]
    measured += [
        (f.position, f.candidate, Measurement.failed(Status.WRONG_RESULT, str(f.error)))
        for f in result.failed
        if isinstance(f.error, WrongResult)
    ]
    copy_known = copy_ms is not None and math.isfinite(copy_ms) and copy_ms > 0
    rows = []
    for position, candidate, measurement in sorted(measured, key=lambda item: item[0]):
        info = StudyInfo(gpu=gpu, run_id=run_id, study=RACE_STUDY, sampler=RACE_STUDY, trial=position)
        row = trial_row(
            identity,
            shape,
            dtype,
            config_of(candidate),
            measurement,
            float(copy_ms) if copy_known else math.nan,
            info,
            families,
        )
        if not copy_known:
            row["copy_ms"] = None
            if measurement.ok:
                row["ratio_to_copy"] = None
        rows.append(row)
    return rows


class RaceRecorder:
    """This process's race rows under one results directory, per GPU label."""

    def __init__(self, directory: Path, now: float | None = None) -> None:
        self.directory = Path(directory)
        self._started = time.time() if now is None else now
        self.rows: dict[str, list[Row]] = {}  # gpu label -> every row recorded for it
        self.failures = 0

    def run_id(self, gpu: str) -> str:
        return race_run_id(gpu, self._started)

    def path(self, gpu: str) -> Path:
        return self.directory / gpu / f"{self.run_id(gpu)}.parquet"

    def record(self, gpu: str, build_rows: Callable[[str], list[Row]]) -> Path | None:
        """Add the rows `build_rows(run_id)` returns and rewrite this GPU's run file with every
        row recorded for it so far. Returns the file, or None when nothing was written
        (a failure is logged, never raised; rows built before a failed write are kept for the
        next one)."""
        try:
            run_id = self.run_id(gpu)
            new = build_rows(run_id)
            if not new:
                return None
            rows = self.rows.setdefault(gpu, [])
            rows.extend(new)  # kept when the write fails: the next write carries them
            return write_table(rows, self.directory / gpu, run_id)
        except Exception as exc:
            self.failures += 1
            level = logging.WARNING if self.failures == 1 else logging.DEBUG
            log.log(
                level,
                "could not record the race's measurements under %s (%s: %s); going on without them",
                self.directory,
                type(exc).__name__,
                exc,
            )
            return None
