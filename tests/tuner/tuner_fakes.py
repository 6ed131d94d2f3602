"""Fakes for the tuner's tests: a GPU identity, a synthetic but structured timing
landscape, and recordings built from it."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from results.schema import Status
from results.store import write_table
from tuner.run.rows import StudyInfo, trial_row
from tuner.runners.bench import BenchRunner
from tuner.runners.runner import GpuIdentity, Measurement, Work
from variants import DTYPES, FAMILIES, Config, DType, Shape

IDENTITY = GpuIdentity(
    name="NVIDIA H200",
    compute_capability="9.0",
    sm_count=132,
    driver_version="575.0",
    cuda_version="12.9",
    cupy_version="13.4.0",
    host="testhost",
)
SHAPE = Shape.parse("B=8,T=1024,NH=32,NH_KV=8,HD=128")
SMALL = Shape.parse("B=1,T=256,NH=14,NH_KV=2,HD=64")
BANDWIDTH_GBPS = 4000.0

_FAMILY_FACTOR = {
    "naive": 5.0,
    "gather": 2.2,
    "vec": 1.05,
    "warp_per_head": 1.12,
    "split": 1.0,
    "tile": 1.01,
    "bulk": 1.04,
    "flat": 1.03,
    "split_runtime": 1.02,
    "warp_sum": 1.015,
    "warp_sum_runtime": 1.018,
}
_BLOCK_FACTOR = {32: 1.35, 64: 1.12, 128: 1.03, 256: 1.0, 512: 1.02, 1024: 1.07}


def copy_ms(shape: Shape, dtype: DType) -> float:
    return shape.bytes_moved(dtype) / (BANDWIDTH_GBPS * 1e9) * 1e3


def _noise(key: str) -> float:
    digest = hashlib.sha256(key.encode()).digest()
    return 1.0 + (digest[0] / 255.0 - 0.5) * 0.02


def synthetic_ms(shape: Shape, dtype: DType, config: Config) -> float:
    """A deterministic landscape shaped like the real one: the family matters most, then
    vector width and block size, then the cache hints."""
    v = config.values
    factor = _FAMILY_FACTOR[config.family]
    if config.family == "naive" and dtype.itemsize == 2:
        factor *= 1.8
    block = v.get("block", 32 * v.get("warps", 1))
    factor *= _BLOCK_FACTOR.get(block, 1.1)
    factor *= {4: 1.6, 8: 1.15, 16: 1.0}.get(v.get("vec_bytes", 16), 1.0)
    factor *= {1: 1.12, 2: 1.05, 4: 1.0, 8: 1.03}.get(v.get("items", 4), 1.0)
    factor *= {"plain": 1.02, "ldg": 1.01, "ldcs": 1.0}.get(v.get("load", "ldcs"), 1.0)
    factor *= {"plain": 1.01, "stcs": 1.0}.get(v.get("store", "stcs"), 1.0)
    return copy_ms(shape, dtype) * factor * _noise(f"{shape.key}/{dtype.name}/{config.key}")


def synthetic_bench(shape: Shape, dtype: DType, config: Config) -> Measurement:
    t = synthetic_ms(shape, dtype, config)
    return Measurement(status=Status.OK, time_ms=t, p20_ms=t * 0.99, p80_ms=t * 1.01, reps=50)


def synthetic_runner(bench=synthetic_bench) -> BenchRunner:
    return BenchRunner(bench, IDENTITY, copy_ms)


class RecordingRunner(BenchRunner):
    """The synthetic landscape (or `bench`), remembering what it was asked to prepare (the
    GPU runner compiles those kernels in parallel threads) and whether it was closed."""

    def __init__(self, bench=synthetic_bench) -> None:
        super().__init__(bench, IDENTITY, copy_ms)
        self.prepared: list[list[Work]] = []
        self.closed = False

    def prepare(self, work) -> int:
        self.prepared.append(list(work))
        return len(self.prepared[-1])

    def close(self) -> None:
        self.closed = True


def recording_rows(
    shapes: Iterable[Shape], dtypes: Iterable[str] = tuple(DTYPES), gpu: str = "h200", bench=synthetic_bench
) -> list[dict]:
    """Exhaustive rows (every valid configuration) for each shape and dtype."""
    rows = []
    info = StudyInfo(gpu=gpu, run_id="recording", study="grid", sampler="grid")
    for shape in shapes:
        for name in dtypes:
            dtype = DTYPES[name]
            for family in FAMILIES.values():
                for config in family.valid_configs(shape, dtype):
                    m = bench(shape, dtype, config)
                    rows.append(trial_row(IDENTITY, shape, dtype, config, m, copy_ms(shape, dtype), info))
    return rows


def partial_recording_rows() -> list[dict]:
    """A recording of SMALL in bf16 that holds every naive configuration and every other
    gather one, and no other family: a replay explores naive and gather only, and finds half
    of gather missing."""
    rows = recording_rows([SMALL], ["bf16"])
    gather = [r for r in rows if r["family"] == "gather"]
    return [r for r in rows if r["family"] == "naive"] + gather[::2]


def write_recording(directory: Path, shapes: Iterable[Shape], dtypes: Iterable[str] = tuple(DTYPES)) -> Path:
    return write_table(recording_rows(shapes, dtypes), Path(directory) / "h200", "recording")


def optimum_ms(shape: Shape, dtype: DType) -> float:
    return min(
        synthetic_ms(shape, dtype, c) for f in FAMILIES.values() for c in f.valid_configs(shape, dtype)
    )


def frame_of(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows)


def isinf(x: float) -> bool:
    return math.isinf(x)
