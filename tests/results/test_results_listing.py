"""Every entry named *.parquet under the results directories is read or reported with why
(results.listing), and a trial read twice counts once (results.store.distinct_rows)."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pytest
from trial_rows import S1, SPLIT16, VEC16, h100_rows, trial, write_unchecked

from results.listing import list_results
from results.store import load_results, write_table


def test_entries_that_are_not_files_are_skipped_and_reported_with_why(tmp_path: Path) -> None:
    good = write_table(h100_rows(), tmp_path / "h100", "run")
    (tmp_path / "h100" / "odd.parquet").mkdir()  # a directory named like a results file
    os.mkfifo(tmp_path / "h100" / "pipe.parquet")  # a reader that opened it would block
    os.symlink("loop-b.parquet", tmp_path / "loop-a.parquet")
    os.symlink("loop-a.parquet", tmp_path / "loop-b.parquet")
    os.symlink("gone.parquet", tmp_path / "dangling.parquet")
    os.symlink(good, tmp_path / "alias.parquet")  # a link to a results file: that file, once
    (tmp_path / ".tmp-123@host@x.parquet").write_bytes(b"PAR1")  # a writer's temporary: ignored

    result: list = []
    reader = threading.Thread(target=lambda: result.append(load_results(tmp_path)), daemon=True)
    reader.start()
    reader.join(30)
    assert result, "the load blocked (on the FIFO?)"
    frame, report = result[0]
    assert len(frame) == len(h100_rows()) and len(report.files) == 1
    why = {Path(p).name: reason for p, reason in report.skipped.items()}
    assert why == {
        "odd.parquet": "a directory, not a file",
        "pipe.parquet": "a FIFO, not a file: never opened",
        "loop-a.parquet": "a symbolic link loop, not a file",
        "loop-b.parquet": "a symbolic link loop, not a file",
        "dangling.parquet": "a symbolic link to nothing: its target does not exist",
    }
    assert list_results(tmp_path).skipped == report.skipped


def test_a_file_copied_byte_for_byte_and_a_row_written_twice_count_once(tmp_path: Path) -> None:
    original = write_table(h100_rows(), tmp_path / "h100", "run")
    shutil.copyfile(original, tmp_path / "h100" / "run-copy.parquet")
    twice = trial("h100", S1, "bf16", "vec", VEC16, 0.11, number=20)
    write_unchecked(
        [twice, twice, trial("h100", S1, "bf16", "split", SPLIT16, 0.2, number=21)], tmp_path, "more"
    )
    frame, report = load_results(tmp_path)
    assert len(frame) == len(h100_rows()) + 2 and report.duplicate_rows == len(h100_rows()) + 1
    assert len(report.files) == 3 and not report.skipped
    assert frame.equals(frame.drop_duplicates())


def test_rows_of_another_identity_are_kept_and_a_trial_rewritten_counts_once(tmp_path: Path) -> None:
    """A row is who measured what, and when (ROW_IDENTITY): another host is another trial; the
    same trial written again with other values (a tool that rewrote it, a column dropped) is the
    first row read twice."""
    row = trial("h100", S1, "bf16", "vec", VEC16, 0.11, number=20)
    rewritten = {**row, "time_ms": 0.12, "driver_version": None}
    write_unchecked([row, {**row, "host": "other"}, rewritten], tmp_path, "close")
    frame, report = load_results(tmp_path)
    assert len(frame) == 2 and report.duplicate_rows == 1
    assert frame["time_ms"].tolist() == [0.11, 0.11]
    assert sorted(frame["host"]) == sorted([row["host"], "other"])


@pytest.mark.parametrize("copies", [1, 3])
def test_the_first_copy_of_a_row_is_kept_in_place(tmp_path: Path, copies: int) -> None:
    rows = h100_rows()
    write_unchecked(rows * copies, tmp_path, "rows")
    frame, report = load_results(tmp_path)
    assert frame["trial"].tolist() == [r["trial"] for r in rows]
    assert report.duplicate_rows == len(rows) * (copies - 1)
