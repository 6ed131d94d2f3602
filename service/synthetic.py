"""Synthetic trial rows for tests and benchmarks of the service: a made-up performance
model, never a measurement. Every row says so: host "synthetic", study "synthetic",
run ids starting with "synthetic-", gpu_name starting with "SYNTHETIC". Never write them
under results/data.

The model: a kernel reaches a family- and vector-width-dependent fraction of the copy's
bandwidth, minus a penalty for a block size away from an optimum that grows with the
number of tokens, plus a little lognormal noise; a few percent of trials fail.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pandas as pd

import variants
from results.schema import FAILURES, Status
from results.store import write_table
from variants import Config, DType, Shape

# label -> (device name, copy bandwidth in GB/s, SM count)
GPUS: dict[str, tuple[str, float, int]] = {
    "h100": ("SYNTHETIC H100", 2900.0, 132),
    "h200": ("SYNTHETIC H200", 4100.0, 132),
    "a100": ("SYNTHETIC A100", 1700.0, 108),
}
FAMILY_EFFICIENCY = {
    "naive": 0.16,
    "gather": 0.32,
    "vec": 0.80,
    "warp_per_head": 0.78,
    "split": 0.90,
    "tile": 0.89,
    "bulk": 0.89,
    "flat": 0.82,
    "split_runtime": 0.86,
    "warp_sum": 0.87,
    "warp_sum_runtime": 0.86,
}
VEC_EFFICIENCY = {4: 0.72, 8: 0.9, 16: 1.0}
START = datetime(2025, 1, 1, tzinfo=timezone.utc)


def default_shapes() -> list[Shape]:
    return [
        Shape(b, t, nh, nh_kv, hd)
        for (nh, nh_kv, hd) in ((32, 8, 128), (16, 4, 64), (64, 8, 128))
        for (b, t) in ((1, 1024), (4, 1024), (8, 1024), (16, 2048))
    ]


def block_of(config: Config) -> int:
    values = config.values
    return int(values["block"]) if "block" in values else 32 * int(values["warps"])


def model_time(
    gpu: str, shape: Shape, dtype: DType, config: Config, rng: random.Random
) -> tuple[float, float]:
    """(kernel ms, copy ms) under the synthetic model."""
    _, bandwidth, _ = GPUS[gpu]
    copy_ms = shape.bytes_moved(dtype) / (bandwidth * 1e9) * 1e3 + 0.004
    values = config.values
    efficiency = FAMILY_EFFICIENCY[config.family] * VEC_EFFICIENCY.get(values.get("vec_bytes", 16), 1.0)
    if config.family == "split":
        efficiency *= 1.0 + 0.04 * math.log2(values["items"]) - 0.01 * math.log2(values["items"]) ** 2
    best_block = 2 ** min(10, max(6, round(math.log2(shape.tokens)) - 4))
    efficiency *= 1.0 - 0.035 * (math.log2(block_of(config)) - math.log2(best_block)) ** 2
    if values.get("load") == "ldcs":
        efficiency *= 1.01 if shape.tokens >= 4096 else 0.99
    if values.get("store") == "stcs":
        efficiency *= 1.005
    efficiency = max(efficiency, 0.02)
    time_ms = (copy_ms - 0.004) / efficiency + 0.005
    return time_ms * math.exp(rng.gauss(0.0, 0.01)), copy_ms


def synthetic_rows(
    gpu: str,
    shape: Shape,
    dtype: DType,
    trials: int | None,
    rng: random.Random,
    run_id: str,
    failure_rate: float = 0.03,
) -> list[dict[str, Any]]:
    """One synthetic study: the baseline first, then `trials` random configurations (every
    configuration of every family once, in random order, when trials is None)."""
    name, _, sm_count = GPUS[gpu]
    space = [c for family in variants.FAMILIES.values() for c in family.space()]
    if trials is None:
        rng.shuffle(space)
        configs = [variants.BASELINE, *space]
    else:
        configs = [variants.BASELINE, *(rng.choice(space) for _ in range(trials))]
    rows = []
    for number, config in enumerate(configs):
        family = variants.get_family(config.family)
        time_ms, copy_ms = model_time(gpu, shape, dtype, config, rng)
        reason = family.rejection(shape, dtype, config)
        status, message, name_expression, grid, block = Status.OK, "", None, None, block_of(config)
        if reason:
            status, message = Status.INVALID, reason
        elif rng.random() < failure_rate:
            status, message = rng.choice(FAILURES), "synthetic failure"
        if status != Status.INVALID:
            name_expression = family.name_expression(shape, dtype, config)
            launch = family.geometry(shape, dtype, config, sm_count)
            grid, block = launch.grid, launch.block
        ok = status == Status.OK
        bytes_moved = shape.bytes_moved(dtype)
        rows.append(
            {
                "gpu": gpu,
                "gpu_name": name,
                "compute_capability": "9.0",
                "sm_count": sm_count,
                "driver_version": "synthetic",
                "cuda_version": "synthetic",
                "cupy_version": "synthetic",
                "host": "synthetic",
                **shape.as_dict(),
                "dtype": dtype.name,
                "family": config.family,
                "params": json.dumps(config.values, sort_keys=True),
                "config_key": config.key,
                "name_expression": name_expression,
                "source_hash": family.source_hash,
                "grid": grid,
                "block": block,
                "status": status.value,
                "message": message,
                "time_ms": time_ms if ok else math.inf,
                "p20_ms": time_ms * 0.99 if ok else math.inf,
                "p80_ms": time_ms * 1.01 if ok else math.inf,
                "reps": 100 if ok else 0,
                "bytes_moved": bytes_moved,
                "gbps": bytes_moved / (time_ms * 1e6) if ok else None,
                "copy_ms": copy_ms,
                "ratio_to_copy": time_ms / copy_ms if ok else None,
                "study": "synthetic",
                "sampler": "random",
                "seed": 0,
                "trial": number,
                "run_id": run_id,
                "timestamp": START + timedelta(seconds=number),
                "tuner_version": "synthetic",
            }
        )
    return rows


def synthetic_frame(
    gpus: Iterable[str] = ("h100", "h200"),
    shapes: Sequence[Shape] | None = None,
    dtypes: Iterable[str] = ("bf16", "fp32"),
    trials: int | None = 60,
    seed: int = 0,
) -> pd.DataFrame:
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    for gpu in gpus:
        for shape in shapes or default_shapes():
            for dtype_name in dtypes:
                rows += synthetic_rows(
                    gpu, shape, variants.get_dtype(dtype_name), trials, rng, f"synthetic-{gpu}"
                )
    return pd.DataFrame(rows)


def write_synthetic_store(directory: Path, **kwargs: Any) -> list[Path]:
    """One parquet file per GPU under directory (which must not be results/data)."""
    frame = synthetic_frame(**kwargs)
    return [write_table(rows, directory, f"synthetic-{gpu}") for gpu, rows in frame.groupby("gpu")]
