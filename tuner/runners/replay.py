"""Replay: answer trials from recorded parquet instead of a GPU (as Kernel Tuner's
simulation mode does).

A configuration is answered with what was measured for it on that GPU label, shape and
dtype; the copy time is the recorded same-run copy. A configuration the recording lacks is
answered with status MISSING: the study does not write it, counts it and reports it at
the end. Nothing is ever invented.

`delay_s` makes every answer take that long (`--replay-delay`), as a GPU's measurement
does: a fleet test can then stop or kill a worker in the middle of a trial. The delay is
cut short by a stop request (the trial then ends without a row).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd

from results.listing import resolved
from results.schema import (
    DEFAULT_HOLD_US,
    L2_COLD,
    SHAPE_COLUMNS,
    Status,
    holds,
    l2_states,
    ops_of,
    rows_of_op,
)
from results.store import bundled_results_dir, load_results
from tuner.cli.arguments import directory
from tuner.interrupt import TrialInterrupted
from tuner.runners.runner import GpuIdentity, GroupKey, Measurement, Runner
from variants import DEFAULT_OP, Config, DType, Family, Shape, get_op
from variants.errors import RepkvTuneError

BUNDLED = "bundled"  # names the measurements shipped with the package, wherever it is installed


class NoRecording(RepkvTuneError, ValueError):
    """The recording holds nothing for what was asked."""


def recording_dir(text: str) -> Path:
    """A recording named on the command line: a results directory, or `bundled`, the
    measurements shipped with the package (`./bundled` is a directory of that name)."""
    return bundled_results_dir() if text == BUNDLED else directory(text)


def bundled_note(named: str) -> str:
    """How to name the bundled measurements (`named`: "--replay bundled") and where they live."""
    return f"{named}, the measurements shipped with the package (in {bundled_results_dir()})"


def no_rows(directory: Path, advice: str) -> str:
    """Why a recording answers nothing (the directory is missing, or holds no trial rows), and
    `advice`: what to do instead."""
    where = (
        f"{directory} does not exist" if not Path(directory).exists() else f"no trial rows under {directory}"
    )
    if resolved(Path(directory)) == resolved(bundled_results_dir()):
        return f"{where}: this install of repkv-tune ships no measurements"
    return f"{where}: {advice}"


def recorded_labels(frame: pd.DataFrame) -> list[str]:
    return sorted(frame["gpu"].dropna().unique())


def choose_label(frame: pd.DataFrame, gpu: str | None) -> str:
    """The label to replay: the one asked for, or the recording's only one."""
    labels = recorded_labels(frame)
    if gpu is None:
        if len(labels) != 1:
            raise NoRecording(f"the recording holds GPUs {', '.join(labels) or 'none'}; pick one with --gpu")
        return labels[0]
    if gpu not in labels:
        raise NoRecording(f"the recording holds no GPU {gpu!r}; it has {', '.join(labels) or 'none'}")
    return gpu


class ReplayRunner(Runner):
    """Answers trials from the rows of one GPU label timed in one L2 state."""

    def __init__(
        self,
        frame: pd.DataFrame,
        gpu: str | None = None,
        *,
        delay_s: float = 0.0,
        l2: str = L2_COLD,
        op: str = DEFAULT_OP,
    ) -> None:
        super().__init__()
        self.delay_s = max(0.0, float(delay_s))
        self.op = get_op(op)
        others = sorted(set(ops_of(frame)) - {self.op.name})
        frame = rows_of_op(frame, self.op.name)
        if frame.empty and others:  # not "holds GPUs none": it holds them, of other ops
            raise NoRecording(f"the recording holds no rows of {self.op.name}, only of {', '.join(others)}")
        self.gpu = choose_label(frame, gpu)
        rows = frame[(frame["gpu"] == self.gpu) & (l2_states(frame) == l2)]
        if rows.empty:
            of_op = "" if self.op.name == DEFAULT_OP else f" of {self.op.name}"
            raise NoRecording(f"the recording holds no rows{of_op} of GPU {self.gpu!r} timed with L2 {l2}")
        rows = fullest_timing(rows)
        first = rows.iloc[0]
        self.identity = GpuIdentity(
            name=str(first["gpu_name"] or self.gpu),
            compute_capability=str(first["compute_capability"] or ""),
            sm_count=int(first["sm_count"]) if pd.notna(first["sm_count"]) else 0,
            driver_version=str(first["driver_version"] or ""),
            cuda_version=str(first["cuda_version"] or ""),
            cupy_version=str(first["cupy_version"] or ""),
            host=str(first["host"] or ""),
            empty_launch_ms=_recorded_median(rows, "empty_launch_ms"),
            hold_us=_recorded_median(rows, "hold_us"),
            l2=l2,
            copy_method=_recorded_mode(rows, "copy_method"),
        )
        self._answers: dict[GroupKey, dict[str, Measurement]] = {}
        self._copies: dict[GroupKey, float] = {}
        self.shapes: dict[GroupKey, Shape] = {}
        self._index(rows)

    @classmethod
    def from_directory(
        cls,
        directory: Path,
        gpu: str | None = None,
        *,
        delay_s: float = 0.0,
        l2: str = L2_COLD,
        op: str = DEFAULT_OP,
    ) -> ReplayRunner:
        frame, _ = load_results(Path(directory))
        if frame.empty:
            advice = f"replay a results directory of recorded trials, or {bundled_note('--replay bundled')}"
            raise NoRecording(no_rows(directory, advice))  # names the directory itself
        try:
            return cls(frame, gpu, delay_s=delay_s, l2=l2, op=op)
        except NoRecording as exc:
            raise NoRecording(f"{exc} (in {directory})") from None

    def _index(self, rows: pd.DataFrame) -> None:
        """Every recorded answer and copy time, at once (a recording holds thousands of
        configurations: a pass per configuration took half a minute for the bundled one)."""
        keys, self.shapes = _group_keys(rows)
        self._answers = {gkey: {} for gkey in sorted(self.shapes)}
        copies = pd.to_numeric(rows["copy_ms"], errors="coerce").to_numpy(float, na_value=np.nan)
        timed = np.isfinite(copies) & (copies > 0)
        medians = pd.Series(copies[timed]).groupby(keys[timed].to_numpy()).median()
        self._copies = {gkey: float(ms) for gkey, ms in medians.items()}
        for gkey, config_key, answer in _answers(rows, keys):
            self._answers[gkey][config_key] = answer

    def runnable_families(self, shape: Shape, dtype: DType) -> dict[str, Family]:
        """The families the recording measured for (shape, dtype): a replay explores only what
        it can answer (a family added since the recording would make every trial of it
        MISSING). All families where the group was not recorded."""
        recorded = {key.partition("[")[0] for key in self.recorded(shape, dtype)}
        return {name: f for name, f in self.op.families.items() if name in recorded or not recorded}

    def groups(self) -> list[tuple[Shape, str]]:
        """Every recorded (shape, dtype) with a copy time."""
        return [(self.shapes[g], g[1]) for g in sorted(self.shapes) if g in self._copies]

    def recorded(self, shape: Shape, dtype: DType) -> dict[str, Measurement]:
        """config key -> answer, for one (shape, dtype)."""
        return dict(self._answers.get((shape.key, dtype.name), {}))

    def copy_time(self, shape: Shape, dtype: DType) -> float:
        try:
            return self._copies[(shape.key, dtype.name)]
        except KeyError:
            raise NoRecording(
                f"the recording has no copy time for {shape} {dtype.name} on {self.gpu}"
            ) from None

    def measure(self, shape: Shape, dtype: DType, config: Config) -> Measurement:
        if self.stop.sleep(self.delay_s):
            raise TrialInterrupted
        answer = self._answers.get((shape.key, dtype.name), {}).get(config.key)
        if answer is None:
            self.missing[(shape.key, dtype.name)] += 1
            return Measurement.failed(Status.MISSING, f"{config.key} is not in the recording")
        return answer


def fullest_timing(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (shape, dtype), the rows of one timing (one hold): the one that recorded the most
    configurations, as a replay wants the fullest recording (an exhaustive grid timed without
    the hold beats 40 configurations timed with it); on a tie, the one the store serves first
    (the tuner's hold). A replay never answers with times of two kinds."""
    if rows.empty:
        return rows
    hold = holds(rows)
    keys = [rows[c] for c in (*SHAPE_COLUMNS, "dtype")]
    counts = rows.groupby([*keys, hold])["config_key"].transform("nunique")
    served = (hold == DEFAULT_HOLD_US).astype(int)
    rank = counts * 2 + served  # more configurations first, then the served timing
    return rows[rank == rank.groupby(keys).transform("max")]


def _recorded_median(rows: pd.DataFrame, column: str) -> float | None:
    """The median of the recording's values of `column` (its empty launch, its hold), or None
    if it has none."""
    if column not in rows:
        return None
    values = pd.to_numeric(rows[column], errors="coerce").dropna()
    return float(values.median()) if len(values) else None


def _recorded_mode(rows: pd.DataFrame, column: str) -> str | None:
    """The recording's most common value of `column` (how its copies were timed), or None."""
    if column not in rows:
        return None
    values = rows[column].dropna()
    return str(values.mode().iloc[0]) if len(values) else None


def _group_keys(rows: pd.DataFrame) -> tuple[pd.Series, dict[GroupKey, Shape]]:
    """Each row's (shape key, dtype), as the runner files its answers, and each one's shape."""
    dims = list(zip(*(rows[c].astype(int).tolist() for c in SHAPE_COLUMNS), strict=True))
    shapes = {d: Shape(**dict(zip(SHAPE_COLUMNS, d, strict=True))) for d in set(dims)}
    keys = [(shapes[d].key, str(t)) for d, t in zip(dims, rows["dtype"].tolist(), strict=True)]
    groups = {key: shapes[d] for key, d in zip(keys, dims, strict=True)}
    return pd.Series(keys, index=rows.index, dtype=object), groups


def _answers(rows: pd.DataFrame, keys: pd.Series) -> Iterator[tuple[GroupKey, str, Measurement]]:
    """The recorded answer of each configuration: the median of its ok measurements (the
    lower middle one of an even count), or its latest failure when it never ran correctly."""
    frame = rows.assign(_group=keys, _order=range(len(rows)))
    by = ["_group", "config_key"]
    ok = frame[frame["status"] == Status.OK].sort_values([*by, "time_ms", "_order"], kind="stable")
    place = ok.groupby(by, sort=False).cumcount().to_numpy()
    count = ok.groupby(by, sort=False)["_order"].transform("size").to_numpy()
    median = ok[place == (count - 1) // 2]
    for gkey, config_key, message, time_ms, p20, p80, reps in zip(
        median["_group"],
        median["config_key"].astype(str),
        median["message"],
        median["time_ms"].astype(float),
        pd.to_numeric(median["p20_ms"], errors="coerce"),
        pd.to_numeric(median["p80_ms"], errors="coerce"),
        pd.to_numeric(median["reps"], errors="coerce"),
        strict=True,
    ):
        yield (
            gkey,
            config_key,
            Measurement(
                status=Status.OK,
                message=_text(message),
                time_ms=time_ms,
                p20_ms=float(p20) if pd.notna(p20) else math.nan,
                p80_ms=float(p80) if pd.notna(p80) else math.nan,
                reps=int(reps) if pd.notna(reps) else 0,
            ),
        )
    answered = set(zip(median["_group"], median["config_key"].astype(str), strict=True))
    failed = frame.sort_values(["timestamp", "_order"], kind="stable").drop_duplicates(by, keep="last")
    for gkey, config_key, status, message in zip(
        failed["_group"], failed["config_key"].astype(str), failed["status"], failed["message"], strict=True
    ):
        if (gkey, config_key) not in answered:
            yield gkey, config_key, Measurement.failed(Status(status), _text(message))


def _text(value: object) -> str:
    return "" if value is None or (not isinstance(value, str) and pd.isna(value)) else str(value)
