"""results.writing: what a whole-file write does to the path it is given."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from results.writing import write_text


def test_a_link_is_written_through_and_kept(tmp_path: Path) -> None:
    (tmp_path / "llmc").mkdir()
    real = tmp_path / "llmc" / "repkv.cuh"
    real.write_text("old")
    link = tmp_path / "repkv_tuned.cuh"
    link.symlink_to(real)
    write_text("new", link)
    assert link.is_symlink() and real.read_text() == "new"
    assert sorted(p.name for p in (tmp_path / "llmc").iterdir()) == ["repkv.cuh"]


def test_a_pipe_or_device_is_written_in_place_not_replaced_by_a_file(tmp_path: Path) -> None:
    fifo = tmp_path / "out"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # so that opening it to write does not wait
    try:
        write_text("header", fifo)
        assert os.read(reader, 100) == b"header"
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
