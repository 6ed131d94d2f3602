"""The hold-out battery's driver: which bench command each part runs (python3 stood in for by a
script that records its arguments), and an unknown part refused (no GPU)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

BATTERY = Path(__file__).resolve().parents[2] / "scripts" / "holdout_battery.sh"


def _run(tmp_path: Path, *parts: str) -> subprocess.CompletedProcess:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "python3"
    fake.write_text('#!/bin/sh\necho "$@" >> "$CALLS"\n')
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "CALLS": str(tmp_path / "calls")}
    return subprocess.run(
        ["bash", str(BATTERY), str(tmp_path / "out"), *parts], env=env, capture_output=True, text=True
    )


def test_an_op_at_a_layout_group_runs_that_op_with_the_step(tmp_path: Path) -> None:
    done = _run(tmp_path, "repkv_forward@mqa", "rope_repkv_forward@rest_c")
    assert done.returncode == 0, done.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert len(calls) == 2
    assert "--op repkv_forward --layouts starcoder,santacoder,gemma-2b,falcon-7b --refine" in calls[0]
    assert "--op rope_repkv_forward --layouts mistral-large-2,falcon-180b --refine" in calls[1]
    assert f"--out {tmp_path}/out/repkv_forward@mqa" in calls[0]
    assert (tmp_path / "out" / "repkv_forward@mqa" / "log.txt").read_text().strip() == "exit 0"


def test_an_unknown_part_is_refused(tmp_path: Path) -> None:
    done = _run(tmp_path, "repkv_forward@nowhere")
    assert done.returncode == 2
    assert "unknown part repkv_forward@nowhere" in done.stdout  # the part's output goes to its log too
    assert not (tmp_path / "calls").exists()


def test_the_refine_parts_are_the_backward_op_at_their_group(tmp_path: Path) -> None:
    done = _run(tmp_path, "refine_rest_c", "refine_mqa")
    assert done.returncode == 0, done.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert "--op repkv_backward --layouts mistral-large-2,falcon-180b --refine" in calls[0]
    assert f"--out {tmp_path}/out/refine_rest_c" in calls[0]
    assert "--op repkv_backward --layouts starcoder,santacoder,gemma-2b,falcon-7b --refine" in calls[1]
