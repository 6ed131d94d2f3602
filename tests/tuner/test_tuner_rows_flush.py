"""A sink's flush writes its part as one chunk per column, however many rows came one by one
(a table of one chunk per row made every flush of a long grid cost ~60 ms in parquet)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from trial_rows import S1, VEC16, trial

import tuner.run.rows as rows_module
from tuner.run.rows import ResultsSink


def test_every_flush_writes_one_chunk_per_column(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    written: list[pa.Table] = []
    write = rows_module.write_arrow

    def spy(table: pa.Table, directory: Path, run_id: str) -> Path:
        written.append(table)
        return write(table, directory, run_id)

    monkeypatch.setattr(rows_module, "write_arrow", spy)
    sink = ResultsSink(tmp_path, "h200", "run-a")
    for n in range(12):
        sink.append(trial("h200", S1, "bf16", "vec", VEC16, 1.0 + n / 100, number=n))
    sink.close()
    assert [t.num_rows for t in written] == list(range(1, 13))
    assert {column.num_chunks for t in written for column in t.columns} == {1}
