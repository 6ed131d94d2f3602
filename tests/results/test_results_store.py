from __future__ import annotations

import itertools
import json
import logging
import os
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from trial_rows import write_unchecked

import variants
from results import store, writing
from results.best import winners
from results.schema import COLUMNS, Status
from results.store import TEMP_PREFIX, load_results, to_table, write_frame, write_table

TRIALS = itertools.count()


def row(**kw) -> dict:
    """A valid trial row of its own trial (rows of one trial are one row read twice)."""
    base = {
        "gpu": "h200",
        "B": 8,
        "T": 1024,
        "NH": 32,
        "NH_KV": 8,
        "HD": 128,
        "dtype": "bf16",
        "family": "vec",
        "params": json.dumps({"block": 256}, sort_keys=True),
        "config_key": "vec[block=256]",
        "status": Status.OK.value,
        "time_ms": 1.0,
        "copy_ms": 1.0,
        "run_id": "r",
        "trial": next(TRIALS),
        "timestamp": datetime(2025, 1, 1, tzinfo=timezone.utc),
    }
    base.update(kw)
    return base


def test_write_is_atomic_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = write_table([row()], tmp_path, "run-1")
    assert path == tmp_path / "run-1.parquet"
    write_table([row(), row(time_ms=2.0)], tmp_path, "run-1")
    assert [p.name for p in tmp_path.iterdir()] == ["run-1.parquet"]
    frame, _ = load_results(tmp_path)
    assert len(frame) == 2 and list(frame.columns) == list(COLUMNS)


def test_a_concurrent_reader_never_sees_a_partial_file(tmp_path: Path) -> None:
    stop = threading.Event()
    seen: list[int] = []
    errors: list[str] = []

    def reader() -> None:
        while not stop.is_set():
            frame, report = load_results(tmp_path)
            if report.skipped:
                errors.extend(report.skipped.values())
            seen.append(len(frame))

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for n in range(1, 40):
            write_table([row(time_ms=float(i + 1)) for i in range(n * 50)], tmp_path, "run-1")
    finally:
        stop.set()
        thread.join()
    assert not errors
    assert all(n % 50 == 0 for n in seen)


def test_loader_skips_temporary_and_corrupt_files_and_keeps_every_good_row(tmp_path: Path, caplog) -> None:
    write_table([row(), row(time_ms=2.0)], tmp_path / "h200", "good")
    write_table([row(gpu="a100")], tmp_path / "a100", "other")
    (tmp_path / "h200" / f"{TEMP_PREFIX}half.parquet").write_bytes(b"PAR1 partial")
    (tmp_path / "h200" / "broken.parquet").write_bytes(b"not parquet at all")
    bad_types = pa.table({"gpu": ["h200"], "B": ["eight"]})
    pq.write_table(bad_types, tmp_path / "h200" / "badtypes.parquet")
    with caplog.at_level(logging.WARNING):
        frame, report = load_results(tmp_path)
    assert len(frame) == 3
    assert {Path(p).name for p in report.skipped} == {"broken.parquet", "badtypes.parquet"}
    assert "skipping results file" in caplog.text


def test_an_older_table_is_upgraded(tmp_path: Path) -> None:
    table = to_table(__import__("pandas").DataFrame([row()]))
    dropped = table.drop_columns(["gbps", "ratio_to_copy", "tuner_version", "host"])
    old = dropped.replace_schema_metadata({b"repkv_tune_schema_version": b"1"})
    pq.write_table(old, tmp_path / "old.parquet")
    frame, report = load_results(tmp_path)
    assert not report.skipped and len(frame) == 1
    assert list(frame.columns) == list(COLUMNS)
    assert frame["gbps"].isna().all() and frame["time_ms"].iloc[0] == 1.0


def test_rows_written_before_a_parameter_existed_read_with_the_value_they_ran_with(tmp_path: Path) -> None:
    before = {"block": 64, "load": "ldg", "store": "stcs", "tokens": 8, "vec_bytes": 16}
    old_tile = row(family="tile", params=json.dumps(before), config_key="tile[block=64,...]")
    write_table([old_tile, row()], tmp_path, "r")
    frame, _ = load_results(tmp_path)
    tile = frame[frame["family"] == "tile"].iloc[0]
    assert json.loads(tile["params"]) == {**before, "order": "tile_fastest", "heads": "runtime"}
    assert (
        tile["config_key"] == variants.Config.of("tile", **before, order="tile_fastest", heads="runtime").key
    )
    assert frame[frame["family"] == "vec"].iloc[0]["config_key"] == "vec[block=256]"  # untouched


def test_a_newer_schema_or_missing_required_column_is_skipped(tmp_path: Path) -> None:
    table = to_table(__import__("pandas").DataFrame([row()]))
    pq.write_table(
        table.replace_schema_metadata({b"repkv_tune_schema_version": b"99"}), tmp_path / "new.parquet"
    )
    pq.write_table(table.drop_columns(["time_ms"]), tmp_path / "norequired.parquet")
    frame, report = load_results(tmp_path)
    assert frame.empty and len(report.skipped) == 2


def test_winners_carry_the_speedup_over_llmc_baseline() -> None:
    import pandas as pd

    base = json.dumps({"block": 128}, sort_keys=True)
    frame = pd.DataFrame(
        [
            row(family="naive", params=base, time_ms=7.0),
            row(family="vec", time_ms=1.0),
            row(family="split", time_ms=float("inf"), status=Status.TIMEOUT),
            row(dtype="fp32", family="vec", time_ms=2.0),
        ]
    )
    best = winners(to_table(frame).to_pandas())
    assert len(best) == 2
    bf16 = best[best["dtype"] == "bf16"].iloc[0]
    assert bf16["family"] == "vec" and bf16["speedup_vs_baseline"] == pytest.approx(7.0)
    fp32 = best[best["dtype"] == "fp32"].iloc[0]
    assert pd.isna(fp32["speedup_vs_baseline"])  # no baseline measured for fp32


def test_new_results_go_to_the_user_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REPKV_RESULTS_DIR", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert store.user_results_dir() == tmp_path / "xdg" / "repkv-tune" / "results"
    monkeypatch.setenv("REPKV_RESULTS_DIR", str(tmp_path / "mine"))
    assert store.user_results_dir() == tmp_path / "mine"
    assert store.bundled_results_dir() == Path(store.__file__).resolve().parent / "data"


def test_readers_load_the_user_directory_then_the_bundled_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundled, mine = tmp_path / "bundled", tmp_path / "mine"
    monkeypatch.setattr(store, "bundled_results_dir", lambda: bundled)
    monkeypatch.setenv("REPKV_RESULTS_DIR", str(mine))
    assert store.read_dirs() == [mine, bundled]
    assert store.read_dirs(bundled=False) == [mine]
    assert store.read_dirs(bundled) == [bundled]  # the bundled store itself: once
    assert load_results(store.read_dirs())[0].empty  # neither exists yet: nothing, no error
    write_table([row(run_id="a")], bundled / "h200", "shipped")
    write_table([row(run_id="b")], mine / "h200", "run")
    frame, report = load_results(store.read_dirs())
    assert list(frame["run_id"]) == ["b", "a"]
    assert report.files == [mine / "h200" / "run.parquet", bundled / "h200" / "shipped.parquet"]
    # a directory nested in another is no reason to read a file twice
    assert len(load_results([bundled, bundled / "h200"])[0]) == 1


def test_temporaries_of_dead_writers_on_this_host_are_cleaned_and_no_others(tmp_path: Path) -> None:
    gpu = tmp_path / "h200"
    gpu.mkdir()
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead_pid = int(dead.stdout)  # a process that has exited
    host = writing._HOST
    names = {
        "dead": f"{store.temp_prefix(dead_pid)}abc.parquet",
        "mine": f"{store.temp_prefix()}def.parquet",
        "other_host": f"{TEMP_PREFIX}{dead_pid}@not-{host}@ghi.parquet",
        "old_legacy": f"{TEMP_PREFIX}k2j3h4.parquet",
        "new_legacy": f"{TEMP_PREFIX}q9w8e7.parquet",
    }
    for name in names.values():
        (gpu / name).write_bytes(b"half a parquet file")
    hour_ago = time.time() - 2 * writing.LEGACY_TEMP_AGE_S
    os.utime(gpu / names["old_legacy"], (hour_ago, hour_ago))
    removed = store.clean_stale_temporaries(tmp_path)
    assert sorted(p.name for p in removed) == sorted([names["dead"], names["old_legacy"]])
    assert sorted(p.name for p in gpu.iterdir()) == sorted(
        [names["mine"], names["other_host"], names["new_legacy"]]
    )


def test_a_temporary_names_its_writer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = []
    replace = os.replace
    monkeypatch.setattr(store.os, "replace", lambda a, b: (seen.append(Path(a).name), replace(a, b)))
    write_table([row()], tmp_path, "run")
    assert seen[0].startswith(f"{TEMP_PREFIX}{os.getpid()}@{writing._HOST}@")


def test_rows_that_cannot_be_trusted_are_dropped_with_why(tmp_path: Path, caplog) -> None:
    shape = variants.Shape(8, 1024, 32, 8, 128)
    floor_ms = shape.bytes_moved(variants.get_dtype("bf16")) / store.MAX_BANDWIDTH * 1e3
    rows = [
        row(),
        row(time_ms=floor_ms * 1.01),  # very fast, but possible
        row(time_ms=floor_ms * 0.99),
        row(time_ms=0.0),
        row(time_ms=-1.0),
        row(status="timeout", time_ms=float("inf")),  # failed trials carry inf: kept
        row(gpu=None),
        row(config_key=""),
        row(run_id=None),
        row(run_id=""),  # as a study run without an id writes: kept
        row(status="great"),
        row(NH_KV=5),
    ]
    write_unchecked(rows, tmp_path, "mixed")
    with caplog.at_level(logging.WARNING):
        frame, report = load_results(tmp_path)
    assert len(frame) == 4 and report.dropped_rows == 8
    assert report.files == [tmp_path / "mixed.parquet"] and not report.skipped
    reasons = report.dropped[str(tmp_path / "mixed.parquet")]
    assert reasons["gpu is null or empty"] == 1 and reasons["config_key is null or empty"] == 1
    assert reasons["run_id is null"] == 1
    assert sum(n for why, n in reasons.items() if "finite positive" in why) == 2
    assert sum(n for why, n in reasons.items() if "100 TB/s" in why) == 1
    assert "dropping 8 of 12 rows" in caplog.text


def test_the_families_a_loader_accepts_can_be_given(tmp_path: Path) -> None:
    faulty = row(family="faulty", params='{"mode": "ok"}', config_key="faulty[mode=ok]")
    write_table([row(), faulty], tmp_path, "run")
    assert len(load_results(tmp_path)[0]) == 1
    assert len(load_results(tmp_path, families={"vec", "faulty"})[0]) == 2


def test_the_test_run_never_uses_the_users_own_results_directory() -> None:
    from results import store

    here = store.user_results_dir()
    assert here != store.platform_results_dir() and "user-results" in str(here)


def test_write_frame_replaces_the_file_whole_and_leaves_no_temporary(tmp_path: Path) -> None:
    rows = pd.DataFrame({"shape": ["a", "b", "c", "d"], "time_ms": [1.0, 2.0, 3.0, 4.0]})
    path = tmp_path / "sub" / "frontier.parquet"
    write_frame(rows.iloc[:3], path)
    assert len(pd.read_parquet(path)) == 3
    write_frame(rows, path)  # the next group: the file grows, whole
    assert pd.read_parquet(path).equals(rows)
    assert [p.name for p in path.parent.iterdir()] == ["frontier.parquet"]  # no temporary left


def test_a_file_of_schema_version_1_loads_as_repkv_backward(tmp_path: Path) -> None:
    """Version 1 had no `op` column: every row of it is repkv backward's."""
    table = to_table(pd.DataFrame([row()])).drop_columns(["op"])
    metadata = {**table.schema.metadata, b"repkv_tune_schema_version": b"1"}
    table = table.replace_schema_metadata(metadata)
    table = table.set_column(
        table.schema.get_field_index("schema_version"), "schema_version", pa.array([1], pa.int16())
    )
    pq.write_table(table, tmp_path / "old.parquet")
    frame, report = load_results(tmp_path)
    assert len(frame) == 1 and not report.dropped_rows
    assert list(frame["op"]) == ["repkv_backward"]
    assert winners(frame)["op"].tolist() == ["repkv_backward"]
