"""Rows are checked whole when their file is loaded, before any reader groups them
(results.validate): a row that fails is dropped, counted under its reason, and never served."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from trial_rows import GATHER, NAIVE128, S1, SPLIT16, VEC16, trial, write_unchecked

from results.best import winners
from results.index import build_index
from results.schema import SCHEMA_VERSION
from results.store import load_results, to_table

GROUP = ("h100", (8, 1024, 32, 8, 128), "bf16")
H100 = "NVIDIA H100 80GB HBM3"  # 3350 GB/s (results.peaks)


def good_rows() -> list[dict]:
    """vec wins at 0.08 ms, split is the runner-up at 0.09, naive (llm.c's) runs 0.70."""
    return [
        trial("h100", S1, "bf16", "naive", NAIVE128, 0.70, number=0, gpu_name=H100),
        trial("h100", S1, "bf16", "vec", VEC16, 0.08, number=1, gpu_name=H100),
        trial("h100", S1, "bf16", "vec", VEC16, 0.085, number=2, gpu_name=H100),
        trial("h100", S1, "bf16", "split", SPLIT16, 0.09, number=3, gpu_name=H100),
    ]


def load(directory: Path, rows: list[dict]) -> tuple[pd.DataFrame, dict[str, int]]:
    path = write_unchecked(rows, directory, "mixed")
    frame, report = load_results(directory)
    return frame, report.dropped.get(str(path), {})


@pytest.mark.parametrize(
    ("params", "why"),
    [
        ("{not json", "params is not a JSON object"),
        ("[256, 16]", "params is not a JSON object"),
        (json.dumps({**VEC16, "block": 128}, sort_keys=True), "config_key is not the key"),
    ],
)
def test_a_row_with_corrupt_params_never_hides_the_valid_rows_of_its_configuration(
    tmp_path: Path, params: str, why: str
) -> None:
    """A faster ok row under vec's config_key whose params say otherwise: before, rows were
    de-duplicated by config_key first, so it stood for vec and, unusable, took vec's valid rows
    with it: the runner-up split was served."""
    corrupt = {**trial("h100", S1, "bf16", "vec", VEC16, 0.05, number=4, gpu_name=H100), "params": params}
    frame, dropped = load(tmp_path, [*good_rows(), corrupt])
    assert len(frame) == 4 and list(dropped.values()) == [1] and next(iter(dropped)).startswith(why)
    best = build_index(frame).groups[GROUP].best
    assert (best.family.name, best.time_ms) == ("vec", 0.08)


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({"empty_launch_ms": -0.003}, "empty_launch_ms is not a finite positive number"),
        ({"copy_ms": -1.0}, "copy_ms is not a finite positive number"),
        ({"l2": "warm"}, "l2 is not one of cold, fed"),
        ({"schema_version": SCHEMA_VERSION + 1}, "schema_version is not one this reader knows"),
        # 302 MB in 15 us: 20 TB/s, 6x the H100's 3.35 TB/s (and far below 100 TB/s)
        ({"time_ms": 0.015}, "status ok but time_ms is below what the shape's bytes take at 3x"),
    ],
    ids=["negative-empty-launch", "negative-copy", "unknown-l2", "newer-row-schema", "six-times-peak"],
)
def test_a_value_out_of_its_columns_range_is_dropped_with_why(tmp_path: Path, fields: dict, why: str) -> None:
    bad = trial("h100", S1, "bf16", "gather", GATHER, 0.05, number=7, gpu_name=H100)  # 1.8x peak
    bad.update(fields)
    rows = [*good_rows(), bad]
    if "schema_version" in fields:  # a row says it is newer than the file's (and this code's) schema
        table = to_table(pd.DataFrame(rows))
        versions = pa.array([SCHEMA_VERSION] * 4 + [SCHEMA_VERSION + 1], pa.int16())
        table = table.set_column(0, table.schema.field(0), versions)
        pq.write_table(table, tmp_path / "mixed.parquet")
        frame, report = load_results(tmp_path)
        dropped = report.dropped[str(tmp_path / "mixed.parquet")]
    else:
        frame, dropped = load(tmp_path, rows)
    assert len(frame) == 4 and list(dropped.values()) == [1], dropped
    assert next(iter(dropped)).startswith(why), dropped
    assert winners(frame)["family"].tolist() == ["vec"]


def test_a_time_near_the_devices_peak_is_kept_and_an_unknown_device_keeps_the_generous_floor(
    tmp_path: Path,
) -> None:
    # 302 MB: 0.070 ms is 4.3 TB/s, 1.3x the H100's peak (L2 may help): kept; on a device of
    # unknown peak 0.015 ms (20 TB/s) is kept too, under the 100 TB/s floor
    near = trial("h100", S1, "bf16", "vec", VEC16, 0.070, number=5, gpu_name=H100)
    unknown = trial("l4", S1, "bf16", "vec", VEC16, 0.015, number=6, gpu_name="NVIDIA L4")
    frame, dropped = load(tmp_path, [*good_rows(), near, unknown])
    assert len(frame) == 6 and dropped == {}


@pytest.mark.parametrize("label", ["../../x", "/abs", "H200", "h200/..", "", "a" * 65])
def test_a_row_whose_gpu_label_is_not_a_label_is_dropped_with_why(tmp_path: Path, label: str) -> None:
    frame, dropped = load(tmp_path, [*good_rows(), {**good_rows()[1], "gpu": label, "trial": 9}])
    assert len(frame) == 4 and set(frame["gpu"]) == {"h100"} and list(dropped.values()) == [1]
    assert next(iter(dropped)).startswith("gpu is " + ("null or empty" if not label else "not a GPU label"))
