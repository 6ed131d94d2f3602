"""`python -m tuner` on a service-only install: what reads results runs, tuning says what to
install. The tuner extra's modules are made unimportable in a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tuner_fakes as F

ROOT = Path(__file__).resolve().parents[2]
SMALL = "B=1,T=256,NH=14,NH_KV=2,HD=64"
EXTRA = ("optuna", "scipy", "tqdm", "rich", "cmaes", "sqlalchemy")  # the `tuner` extra
# A finder ahead of every other: the extra's modules, and anything under them, fail to import.
BLOCK = f"""
import sys
from importlib.abc import MetaPathFinder

class NotInstalled(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {EXTRA!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, NotInstalled())
"""
RUN = f"""
import runpy
sys.argv[0] = "tuner"
try:
    runpy.run_module("tuner", run_name="__main__", alter_sys=True)
finally:
    loaded = sorted(m for m in sys.modules if m.partition(".")[0] in {EXTRA!r})
    assert not loaded, loaded
"""


def _base_install(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "REPKV_RESULTS_DIR": str(cwd / "user-results")}
    return subprocess.run(
        [sys.executable, "-c", BLOCK + RUN, *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("results")
    F.write_recording(directory, [F.SMALL], ["bf16"])
    return directory


def test_the_extra_is_blocked() -> None:
    for name in EXTRA:
        code = BLOCK + f"import {name}"
        probe = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert f"No module named '{name}'" in probe.stderr, probe.stderr


def test_without_the_tuner_extra_the_commands_that_read_results_run(results: Path, tmp_path: Path) -> None:
    for argv in (["--help"], ["tune", "--help"], ["best", "--help"], ["replay-eval", "--help"]):
        out = _base_install(*argv)
        assert out.returncode == 0 and "usage:" in out.stdout, (argv, out.stderr[-2000:])
    best = _base_install("best", "--results", str(results), "--format", "json")
    assert best.returncode == 0, best.stderr[-2000:]
    assert {row["gpu"] for row in json.loads(best.stdout)} == {"h200"}
    table = _base_install("best", "--results", str(results))
    assert table.returncode == 0 and "Winners in" in table.stdout and SMALL in table.stdout, table.stderr
    header = tmp_path / "repkv_tuned.cuh"
    export = _base_install("export", "--results", str(results), "--gpu", "h200", "-o", str(header))
    assert export.returncode == 0, export.stderr[-2000:]
    assert "repkv_backward" in header.read_text()
    variants = _base_install("variants", "--shape", SMALL, "--dtype", "bf16")
    assert variants.returncode == 0 and "valid of" in variants.stdout, variants.stderr[-2000:]
    merge = _base_install("merge", str(results), "-o", str(tmp_path / "merged"))
    assert merge.returncode == 0 and list((tmp_path / "merged").rglob("*.parquet")), merge.stderr[-2000:]


def test_without_the_tuner_extra_the_offline_compile_check_runs() -> None:
    pytest.importorskip("cuda.bindings", reason="the nvrtc extra")
    argv = ["check", "--arch", "sm_90", "--shape", SMALL, "--dtype", "bf16", "--family", "naive"]
    out = _base_install(*argv)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stdout + out.stderr[-2000:]


@pytest.mark.parametrize(
    "argv",
    [
        ["--replay", "REC", "--shape", SMALL, "--dtype", "bf16"],
        ["tune", "--replay", "REC", "--shape", SMALL],
        ["replay-eval", "REC", "--seeds", "1"],
    ],
)
def test_without_it_tuning_says_in_one_line_what_to_install(results: Path, argv: list[str]) -> None:
    out = _base_install(*(str(results) if a == "REC" else a for a in argv))
    assert out.returncode == 2, out.stderr[-2000:]
    assert out.stdout == "" and out.stderr.count("\n") == 1, out.stderr
    assert "pip install 'repkv-tune[tuner]'" in out.stderr and "optuna" in out.stderr


def test_with_it_the_cli_runs() -> None:
    from tuner.__main__ import main

    assert main(["variants", "--shape", SMALL, "--dtype", "bf16"]) == 0


@pytest.mark.parametrize("argv", [["export", "--gpu", "h200"], ["variants"], ["best", "--format", "csv"]])
def test_a_reader_that_stops_early_gets_no_traceback(argv: list[str], tmp_path: Path) -> None:
    """`python -m tuner ... | head -1`: the pipe's reader is gone, the command ends quietly."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "REPKV_RESULTS_DIR": str(tmp_path / "none")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tuner", *argv],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # gone before the first line is written: however large a pipe holds
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 1
    assert "Traceback" not in err and "BrokenPipe" not in err, err
