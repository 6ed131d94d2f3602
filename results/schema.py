"""The trial row: one pyarrow schema, versioned. Bump SCHEMA_VERSION when a column changes
meaning; `results.store.upgrade` turns older tables into this one."""

from __future__ import annotations

import math
import re
from enum import Enum
from typing import Literal, get_args

import pandas as pd
import pyarrow as pa

from variants.errors import RepkvTuneError

SCHEMA_VERSION = 2  # 2: the `op` column (version 1 rows are all repkv_backward)


class Status(str, Enum):
    """What a trial ended as: one closed set for the tuner, the results store and the service.

    A member is a `str` equal to its value (`Status.OK == "ok"`), so it compares directly with
    the plain strings of the parquet column, which stays a string. Everything but `OK` carries
    an infinite time. The last two never reach a row: they mark a trial of the study that
    measured nothing, for the workers sharing it.
    """

    OK = "ok"
    INVALID = "invalid"  # the family's constraints reject the shape (never compiled)
    COMPILE_ERROR = "compile_error"
    LAUNCH_ERROR = "launch_error"  # e.g. too many resources requested for launch
    WRONG_RESULT = "wrong_result"
    TIMEOUT = "timeout"  # the kernel hung; the worker was killed and restarted
    CRASH = "crash"  # illegal address or the worker died; the worker was restarted
    # study-internal, never in a row:
    MISSING = "missing"  # a replayed recording lacks the configuration
    DUPLICATE = "duplicate"  # another live trial claims the configuration

    def __str__(self) -> str:  # "ok", not "Status.OK", on every Python version
        return self.value


# The statuses a trial row may hold.
STATUSES = tuple(s for s in Status if s not in (Status.MISSING, Status.DUPLICATE))
# The failures a measurement may end in (a row with infinite time).
FAILURES = tuple(s for s in STATUSES if s not in (Status.OK, Status.INVALID))

# A GPU label ("h200"): what results are filed under, as a directory name (`<results>/<gpu>/`),
# and what a query names. Every label is held to this wherever it enters: the command line, a
# recording replayed, a row loaded, a request.
GPU_LABEL_PATTERN = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
GPU_LABEL_RULE = "1-64 lower-case letters, digits, '.', '_' or '-', the first a letter or digit"


class InvalidGpuLabel(RepkvTuneError, ValueError):
    """A label that cannot be a directory name."""


def is_gpu_label(value: object) -> bool:
    return isinstance(value, str) and GPU_LABEL_PATTERN.fullmatch(value) is not None


def check_gpu_label(label: object) -> str:
    """`label` if it can name a GPU (and so a directory); InvalidGpuLabel saying why otherwise."""
    if not isinstance(label, str) or not GPU_LABEL_PATTERN.fullmatch(label):
        raise InvalidGpuLabel(f"GPU label {label!r} must be {GPU_LABEL_RULE} (e.g. h100)")
    return label


SHAPE_COLUMNS = ("B", "T", "NH", "NH_KV", "HD")
# The columns that identify one measured answer: what changes the kernel's time.
GROUP_COLUMNS = ("gpu", "op", *SHAPE_COLUMNS, "dtype")
# The columns that identify one trial row: who measured what, and when. Two rows that share
# them are one trial read twice (a file copied, a run merged into a directory that already had
# it, a copy another tool rewrote with a column more or less), whatever their other values.
ROW_IDENTITY = (*GROUP_COLUMNS, "l2", "config_key", "run_id", "study", "trial", "host", "timestamp")

TRIAL_SCHEMA = pa.schema(
    [
        pa.field("schema_version", pa.int16(), nullable=False),
        # who measured: the GPU label the user gave and what the device reported
        pa.field("gpu", pa.string(), nullable=False),
        pa.field("gpu_name", pa.string()),
        pa.field("compute_capability", pa.string()),
        pa.field("sm_count", pa.int32()),
        pa.field("driver_version", pa.string()),
        pa.field("cuda_version", pa.string()),
        pa.field("cupy_version", pa.string()),
        pa.field("host", pa.string()),
        # the problem: the op (variants.OPS) and its shape and dtype
        pa.field("op", pa.string(), nullable=False),
        pa.field("B", pa.int64(), nullable=False),
        pa.field("T", pa.int64(), nullable=False),
        pa.field("NH", pa.int64(), nullable=False),
        pa.field("NH_KV", pa.int64(), nullable=False),
        pa.field("HD", pa.int64(), nullable=False),
        pa.field("dtype", pa.string(), nullable=False),
        # the configuration
        pa.field("family", pa.string(), nullable=False),
        pa.field("params", pa.string(), nullable=False),  # JSON object, sorted keys
        pa.field("config_key", pa.string(), nullable=False),
        pa.field("name_expression", pa.string()),
        pa.field("source_hash", pa.string()),
        pa.field("grid", pa.int64()),
        pa.field("block", pa.int32()),
        # the outcome
        pa.field("status", pa.string(), nullable=False),
        pa.field("message", pa.string()),
        pa.field("time_ms", pa.float64(), nullable=False),  # median; inf unless ok
        pa.field("p20_ms", pa.float64()),
        pa.field("p80_ms", pa.float64()),
        pa.field("reps", pa.int32()),
        pa.field("bytes_moved", pa.int64()),
        pa.field("gbps", pa.float64()),
        pa.field("copy_ms", pa.float64()),  # device copy of the same bytes, same process
        # how copy_ms was timed: COPY_FASTEST, or null (written before: cudaMemcpyAsync alone)
        pa.field("copy_method", pa.string()),
        pa.field("ratio_to_copy", pa.float64()),  # time_ms / copy_ms
        # an empty kernel's launch in the same process, timed alike: below ~32 MB the copy's
        # fixed cost makes ratio_to_copy read low; time_ms / empty_launch_ms says how far above it
        pa.field("empty_launch_ms", pa.float64()),
        # the GPU-side wait after each L2 flush, before the timed call (µs; 0: none, the
        # tuner's default; null: written before it was recorded)
        pa.field("hold_us", pa.float64()),
        # what L2 held when the timed call started: "cold" (flushed: the tuner's default), or
        # "fed" (flushed, then dout written, as the kernel before this one in a training step
        # leaves it); null: written before it was recorded, cold
        pa.field("l2", pa.string()),
        # the search that asked for it
        pa.field("study", pa.string()),
        pa.field("sampler", pa.string()),
        pa.field("seed", pa.int64()),
        pa.field("trial", pa.int32()),
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("timestamp", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("tuner_version", pa.string()),
    ],
    metadata={"repkv_tune_schema_version": str(SCHEMA_VERSION)},
)

COLUMNS = tuple(TRIAL_SCHEMA.names)

# How the tuner times by default: a GPU-side wait of this many µs after each L2 flush, so the
# timed call is already queued when the GPU reaches it (as the peers benchmark times). On the
# H200 it steadied a configuration's time between runs from 3-4% to 0.5-1.5% at 6-10 µs.
# Rows timed otherwise are ranked after rows timed so (`results.best.ranked`), and never
# answer a run that times another way (`tuner.study.claims.stored_answers`).
DEFAULT_HOLD_US = 150.0

# copy_method of rows whose copy_ms is the faster of cudaMemcpyAsync and a 16-byte copy kernel
# (`tuner.runners.gpu.timing.time_device_copy`); null in rows written before, which timed the first alone.
COPY_FASTEST = "fastest"


# The L2 states a trial can be timed in (the `l2` column). Rows of one state are ranked, served
# and compared among themselves alone (`results.best.ok_rows`): which configuration wins
# differs between them (up to 20% at 9-75 MB on the H200).
L2State = Literal["cold", "fed"]
L2_STATES: tuple[str, ...] = get_args(L2State)
L2_COLD, L2_FED = L2_STATES


def l2_states(rows: pd.DataFrame) -> pd.Series:
    """Each row's L2 state; rows written before the column existed (null, or no column at all)
    read as cold: they were timed after a flush."""
    if "l2" not in rows:
        return pd.Series(L2_COLD, index=rows.index)
    return rows["l2"].where(rows["l2"].notna(), L2_COLD).astype(str)


def ops_of(rows: pd.DataFrame) -> pd.Series:
    """Each row's op; rows built without the column (in memory, or written before it) are
    repkv backward's, the one op there was."""
    from variants import DEFAULT_OP

    if "op" not in rows:
        return pd.Series(DEFAULT_OP, index=rows.index)
    return rows["op"].where(rows["op"].notna(), DEFAULT_OP).astype(str)


def with_op(rows: pd.DataFrame) -> pd.DataFrame:
    """`rows` with an `op` column (`ops_of`), so that they group by GROUP_COLUMNS."""
    if "op" in rows and not rows["op"].isna().any():
        return rows
    return rows.assign(op=ops_of(rows))


def rows_of_op(rows: pd.DataFrame, op: str) -> pd.DataFrame:
    """The rows of one op (all of them where the frame has no `op` column and op is the default)."""
    if "op" not in rows:
        from variants import DEFAULT_OP

        return rows if op == DEFAULT_OP else rows.iloc[0:0]
    return rows[ops_of(rows) == op]


def check_l2(value: str) -> str:
    """`value` if it names an L2 state; ValueError saying which do otherwise."""
    if value not in L2_STATES:
        raise ValueError(f"unknown L2 state {value!r}: one of {', '.join(L2_STATES)}")
    return value


def holds(rows: pd.DataFrame) -> pd.Series:
    """Each row's hold (µs), rows written before the column existed (null, or no column at
    all) read as 0: they were timed without a hold."""
    if "hold_us" not in rows:
        return pd.Series(0.0, index=rows.index)
    return pd.to_numeric(rows["hold_us"], errors="coerce").fillna(0.0).astype(float)


def hold_or_zero(value: object) -> float:
    """One row's or one runner's hold, null read as 0."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0.0
    return 0.0 if math.isnan(number) else number
