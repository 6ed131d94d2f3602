"""Synthetic trial rows shared by the results and service tests: every row says
"synthetic"; nothing here is a measurement."""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta, timezone
from typing import Any

import variants
from results.schema import Status

S1 = variants.Shape(8, 1024, 32, 8, 128)
S2 = variants.Shape(1, 1024, 32, 8, 128)
T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)

VEC16 = {"block": 256, "vec_bytes": 16, "load": "plain", "store": "plain"}
SPLIT16 = {"block": 512, "vec_bytes": 16, "items": 4, "load": "ldg", "store": "stcs"}
GATHER = {"block": 128, "load": "plain", "store": "plain"}
NAIVE128 = {"block": 128}
WPH = {"warps": 4, "vec_bytes": 16, "load": "plain", "store": "plain"}


def trial(
    gpu: str,
    shape: variants.Shape,
    dtype: str,
    family: str,
    params: dict[str, Any],
    time_ms: float,
    status: Status = Status.OK,
    number: int = 0,
    op: str = "repkv_backward",
    **extra: Any,
) -> dict[str, Any]:
    """One synthetic trial row (made by the tests, not measured)."""
    fam = variants.get_op(op).family(family)
    config = variants.Config.of(family, **params)
    dt = variants.get_dtype(dtype)
    launch = fam.geometry(shape, dt, config, 132) if fam.rejection(shape, dt, config) is None else None
    ok = status == Status.OK
    copy_ms = shape.bytes_moved(dt) / 3e9
    row = {
        "gpu": gpu,
        "gpu_name": f"SYNTHETIC {gpu.upper()}",
        "compute_capability": "9.0",
        "sm_count": 132,
        "host": "synthetic",
        "op": op,
        **shape.as_dict(),
        "dtype": dtype,
        "family": family,
        "params": json.dumps(params, sort_keys=True),
        "config_key": config.key,
        "source_hash": fam.source_hash,
        "grid": launch.grid if launch else None,
        "block": launch.block if launch else None,
        "status": Status(status).value,
        "time_ms": time_ms if ok else math.inf,
        "p20_ms": time_ms * 0.99 if ok else None,
        "p80_ms": time_ms * 1.01 if ok else None,
        "bytes_moved": shape.bytes_moved(dt),
        "gbps": shape.bytes_moved(dt) / (time_ms * 1e6) if ok else None,
        "copy_ms": copy_ms,
        "ratio_to_copy": time_ms / copy_ms if ok else None,
        "study": "synthetic-test",
        "seed": 0,
        "trial": number,
        "run_id": f"synthetic-{gpu}",
        "timestamp": T0 + timedelta(seconds=number),
    }
    row.update(extra)
    return row


def h100_rows() -> list[dict[str, Any]]:
    return [
        trial("h100", S1, "bf16", "naive", NAIVE128, 0.70, number=0),
        trial("h100", S1, "bf16", "vec", VEC16, 0.10, number=1),
        trial("h100", S1, "bf16", "split", SPLIT16, 0.09, number=2),
        trial("h100", S1, "bf16", "gather", GATHER, 0.001, status=Status.WRONG_RESULT, number=3),
        trial("h100", S1, "bf16", "warp_per_head", WPH, 0.0, status=Status.CRASH, number=4),
        trial("h100", S2, "bf16", "naive", NAIVE128, 0.20, number=0),
        trial("h100", S2, "bf16", "gather", GATHER, 0.05, number=1),
        trial("h100", S1, "fp32", "vec", VEC16, 0.18, number=0),
    ]


def other_rows() -> list[dict[str, Any]]:
    return [
        trial("h200", S1, "bf16", "vec", VEC16, 0.07, number=0, source_hash="0123456789abcdef"),
        # l4: the nearest shape's only configuration rejects HD=100, the next shape's does not
        trial("l4", S1, "bf16", "split", SPLIT16, 0.20, number=0),
        trial("l4", S2, "bf16", "gather", GATHER, 0.50, number=0),
    ]


def write_unchecked(rows: list[dict[str, Any]], directory, name: str):
    """Write rows as a results file the way a hand, an old version or a broken tool might:
    the trial schema's columns, none of them checked (nulls included)."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    from results.schema import COLUMNS, SCHEMA_VERSION, TRIAL_SCHEMA

    loose = pa.schema([f.with_nullable(True) for f in TRIAL_SCHEMA], metadata=TRIAL_SCHEMA.metadata)
    given = pd.DataFrame(rows)
    frame = given.reindex(columns=list(COLUMNS))
    if "op" not in given:  # rows that name no op are repkv backward's
        frame["op"] = "repkv_backward"
    frame["schema_version"] = SCHEMA_VERSION
    frame["timestamp"] = pd.to_datetime(frame["timestamp"], utc=True)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.parquet"
    pq.write_table(pa.Table.from_pandas(frame, schema=loose, preserve_index=False), path)
    return path


def rule_quality_rows() -> list[dict[str, Any]]:
    """GPU "g", where leave-one-out's figures are known by hand (distances from
    results.selection: B=1 and B=2 are 2 apart, B=2 and B=8 4, B=1 and B=8 6):

    tier 0, bf16 at NH=32 NH_KV=8 HD=128: B=1 is served B=2's winner split (1.2 / 1.0),
      B=2 is served B=1's winner vec (2.5 / 2.0), B=8 is served B=2's split (4.4 / 4.0);
    tier 1, bf16 at HD=64: served B=8 HD=128's winner vec, never measured there;
    tier 2, fp32: served B=8 bf16's winner vec (8.0 / 6.0).
    GPU "solo" tuned one shape. Every group holds two families: one family alone would be a
    partial group, which leave-one-out does not judge."""
    layout64 = variants.Shape(8, 1024, 32, 8, 64)
    b1, b2, b8 = (variants.Shape(b, 1024, 32, 8, 128) for b in (1, 2, 8))
    return [
        trial("g", b1, "bf16", "vec", VEC16, 1.0),
        trial("g", b1, "bf16", "split", SPLIT16, 1.2),
        trial("g", b2, "bf16", "split", SPLIT16, 2.0),
        trial("g", b2, "bf16", "vec", VEC16, 2.5),
        trial("g", b8, "bf16", "vec", VEC16, 4.0),
        trial("g", b8, "bf16", "split", SPLIT16, 4.4),
        trial("g", layout64, "bf16", "naive", NAIVE128, 3.0),
        trial("g", layout64, "bf16", "gather", GATHER, 9.0),
        trial("g", b8, "fp32", "split", SPLIT16, 6.0),
        trial("g", b8, "fp32", "vec", VEC16, 8.0),
        trial("solo", b8, "bf16", "vec", VEC16, 4.0),
        trial("solo", b8, "bf16", "split", SPLIT16, 4.4),
    ]
