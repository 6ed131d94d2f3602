"""`pytest -n N` alone runs the suite as ./test.sh does (`--dist loadgroup`: the GPU tests one
at a time on one worker); an explicit `--dist` is left as given."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROBE = """
import os

def pytest_configure(config):
    if not hasattr(config, "workerinput"):  # the controller, after every cmdline_main hook
        with open(os.environ["DIST_PROBE_OUT"], "w") as out:
            out.write(config.option.dist)
"""


@pytest.mark.parametrize(
    ("args", "dist"),
    [(["-n", "2"], "loadgroup"), (["-n", "2", "--dist", "load"], "load"), (["-n", "0"], "no")],
)
def test_the_distribution_mode_pytest_runs_with(args: list[str], dist: str, tmp_path: Path) -> None:
    (tmp_path / "dist_probe.py").write_text(PROBE)
    out = tmp_path / "dist"
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "DIST_PROBE_OUT": str(out)}
    command = [sys.executable, "-m", "pytest", "-p", "dist_probe", "-p", "no:cacheprovider", *args]
    command += ["--collect-only", "-q", "tests/results/test_cells.py"]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert out.read_text() == dist
