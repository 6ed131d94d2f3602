"""`python -m tuner merge`: several results directories in one, each row once, atomically."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import tuner_fakes as F
from trial_rows import write_unchecked

from results.store import load_results, write_table
from tuner.cli.main import main
from tuner.cli.merge import merge
from tuner.runners import replay

ROWS = F.recording_rows([F.SMALL], ["bf16"])[:20]  # a row is who measured what, and when


def _rows(run: str, n: int, start: int = 0) -> list[dict]:
    return [{**r, "run_id": run} for r in ROWS[start : start + n]]


def test_merge_copies_every_row_once_and_adds_what_a_run_wrote_since(tmp_path: Path) -> None:
    a, b, out = tmp_path / "a", tmp_path / "b", tmp_path / "out"
    write_table(_rows("run-a", 5), a / "h200", "run-a")
    write_table(_rows("run-b", 3, 10), b / "h200", "run-b")
    write_table(_rows("run-a", 5), b / "h200", "run-a")  # the same run seen through two hosts
    report = merge([a, b], out)
    assert report.rows_added == 8 and report.rows_present == 5
    assert sorted(p.name for p in (out / "h200").glob("*.parquet")) == ["run-a.parquet", "run-b.parquet"]
    assert merge([a, b], out).rows_added == 0  # merging again adds nothing
    write_table(_rows("run-a", 7), a / "h200", "run-a")  # the run went on: two more rows
    assert merge([a], out).rows_added == 2
    frame, report = load_results(out)
    assert len(frame) == 10 and not report.skipped
    assert not list(out.rglob(".tmp-*"))


def test_merge_command_reports_and_flags_unreadable_files(tmp_path: Path, capsys) -> None:
    a, out = tmp_path / "a", tmp_path / "out"
    write_table(_rows("run-a", 4), a / "h200", "run-a")
    (a / "h200" / "broken.parquet").write_bytes(b"not parquet")
    (a / "h200" / "dangling.parquet").symlink_to(tmp_path / "gone.parquet")
    assert main(["merge", str(a), "-o", str(out)]) == 1
    captured = capsys.readouterr()
    assert "4 rows added" in captured.out and "broken.parquet" in captured.err
    assert "dangling.parquet: a symbolic link to nothing" in captured.err
    assert main(["merge", str(tmp_path / "none"), "-o", str(out)]) == 2


def test_merge_leaves_out_rows_with_a_null_time_and_says_so_in_one_line(tmp_path: Path, capsys) -> None:
    a, out = tmp_path / "a", tmp_path / "out"
    rows = _rows("run-a", 5)
    rows[1]["time_ms"] = rows[3]["time_ms"] = None  # a broken tool's rows: no time at all
    write_unchecked(rows, a / "h200", "run-a")
    assert main(["merge", str(a), "-o", str(out)]) == 0
    captured = capsys.readouterr()
    assert "3 rows added" in captured.out
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "run-a.parquet: 2 rows left out (time_ms is null: 2)" in lines[0]
    frame, report = load_results(out)
    assert len(frame) == 3 and not report.dropped


def test_merge_into_a_file_or_an_unwritable_place_is_one_line(tmp_path: Path, capsys) -> None:
    a = tmp_path / "a"
    write_table(_rows("run-a", 4), a / "h200", "run-a")
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a directory")
    for out in (a_file, a_file / "out"):
        assert main(["merge", str(a), "-o", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and str(a_file) in err[0], err
    assert a_file.read_text() == "not a directory"


def test_merge_leaves_out_rows_with_a_nan_time_and_says_so_in_one_line(tmp_path: Path, capsys) -> None:
    """A NaN time (written by another tool) is not null in the file, but pandas makes it one
    when the rows are written again: merge raised a traceback, after writing other files."""
    a, out = tmp_path / "a", tmp_path / "out"
    write_table(_rows("run-b", 3, 10), a / "h200", "run-b")
    path = write_table(_rows("run-a", 5), a / "h200", "run-a")
    table = pq.read_table(path)
    times = table.column("time_ms").to_pylist()
    times[1] = times[3] = float("nan")
    index = table.schema.get_field_index("time_ms")
    nans = pa.array(times, pa.float64(), from_pandas=False)  # NaN kept, not made null
    table = table.set_column(index, table.schema.field(index), nans)
    pq.write_table(table, path)
    assert main(["merge", str(a), "-o", str(out)]) == 0
    captured = capsys.readouterr()
    assert "6 rows added" in captured.out
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "run-a.parquet: 2 rows left out (time_ms is NaN: 2)" in lines[0]
    frame, report = load_results(out)
    assert len(frame) == 6 and not report.dropped


def test_merge_into_a_directory_inside_a_source_is_refused_and_writes_nothing(tmp_path: Path, capsys) -> None:
    """`merge -o a/merged a` wrote a copy of every row of a inside a: reading a (best, the
    service) then found each row twice."""
    a = tmp_path / "a"
    write_table(_rows("run-a", 5), a / "h200", "run-a")
    assert main(["merge", "-o", str(a / "merged"), str(a)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"error: -o {a / 'merged'} is inside {a}, a directory merged: its rows would then be read "
        f"twice from {a}; give a directory outside it"
    ]
    assert sorted(p.name for p in a.iterdir()) == ["h200"]


def test_merging_one_gpus_directory_writes_its_files_under_that_gpu(tmp_path: Path) -> None:
    a, out = tmp_path / "a", tmp_path / "out"
    write_table(_rows("run-a", 5), a / "h200", "run-a")
    report = merge([a / "h200"], out)
    assert report.files_written == [out / "h200" / "run-a.parquet"]
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*.parquet")) == ["h200/run-a.parquet"]
    assert merge([a], out).rows_added == 0  # the same rows through the directory above


def test_merging_a_directory_into_itself_counts_every_row_as_already_there(tmp_path: Path, capsys) -> None:
    a = tmp_path / "a"
    write_table(_rows("run-a", 5), a / "h200", "run-a")
    assert main(["merge", str(a), "-o", str(a)]) == 0
    assert capsys.readouterr().out.strip() == f"0 rows added to {a} in 0 files; 5 already there"


def test_merge_reads_bundled_as_the_bundled_results(tmp_path: Path, capsys, monkeypatch) -> None:
    bundled = tmp_path / "shipped"
    write_table(_rows("run-a", 5), bundled / "h200", "run-a")
    monkeypatch.setattr(replay, "bundled_results_dir", lambda: bundled)
    out = tmp_path / "out"
    assert main(["merge", "bundled", "-o", str(out)]) == 0
    assert capsys.readouterr().out.startswith(f"5 rows added to {out}")
    assert (out / "h200" / "run-a.parquet").is_file()


def test_merge_leaves_out_rows_no_reader_would_use(tmp_path: Path, capsys) -> None:
    """A negative time, or a time below what the bytes take at the bandwidth bound, was copied
    and then dropped by every reader of the merged directory."""
    a, out = tmp_path / "a", tmp_path / "out"
    rows = _rows("run-a", 5)
    rows[0]["time_ms"], rows[2]["time_ms"] = -1.0, 1e-9
    write_unchecked(rows, a / "h200", "run-a")
    assert main(["merge", str(a), "-o", str(out)]) == 0
    captured = capsys.readouterr()
    assert "3 rows added" in captured.out
    (line,) = captured.err.strip().splitlines()
    assert "run-a.parquet: 2 rows left out (status ok but time_ms is not a finite positive number" in line
    assert "time_ms is below what the shape's bytes take" in line
    frame, report = load_results(out)
    assert len(frame) == 3 and not report.dropped


def test_a_copy_another_tool_rewrote_is_already_there_for_merge_and_readers_alike(tmp_path: Path) -> None:
    a, out = tmp_path / "a", tmp_path / "out"
    write_table(_rows("run-a", 5), a / "h200", "run-a")
    path = write_table(_rows("run-a", 5), a / "h200", "run-a-copy")
    table = pq.read_table(path)
    pq.write_table(table.drop_columns(["driver_version"]), path)  # an optional column fewer
    report = merge([a], out)
    assert report.rows_added == 5 and report.rows_present == 5
    frame, loaded = load_results(a)
    assert len(frame) == 5 and loaded.duplicate_rows == 5
