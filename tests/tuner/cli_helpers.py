"""Helpers shared by the tuner command-line tests (test_tuner_cli_*.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tuner.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
SMALL = "B=1,T=256,NH=14,NH_KV=2,HD=64"


def _tuner(*argv: str, env: dict | None = None, prelude: str = "", timeout: int = 180):
    """`python -m tuner ARGV` in a fresh process (`prelude` runs first, e.g. to hide a module)."""
    code = f"import runpy, sys\n{prelude}\nrunpy.run_module('tuner', run_name='__main__')\n"
    return subprocess.run(
        [sys.executable, "-c", code, *argv],
        cwd=ROOT,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
            **(env or {}),
        },
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _refused(argv: list[str], capsys, runner=None) -> str:
    rc = main(argv, runner=runner)
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("error: "), (argv, rc, err)
    return err[0]
