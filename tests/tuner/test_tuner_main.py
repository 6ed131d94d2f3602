from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_without_the_tuner_extra_one_line_says_what_to_install() -> None:
    # optuna made unimportable, as on a host that installed only the service
    code = "import sys, runpy; sys.modules['optuna'] = None; runpy.run_module('tuner', run_name='__main__')"
    out = subprocess.run(
        [sys.executable, "-c", code, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 2, out.stderr
    assert out.stdout == "" and out.stderr.count("\n") == 1
    assert "pip install 'repkv-tune[tuner]'" in out.stderr and "optuna" in out.stderr


def test_with_it_the_cli_runs() -> None:
    from tuner.__main__ import main

    assert main(["variants", "--shape", "B=1,T=256,NH=14,NH_KV=2,HD=64", "--dtype", "bf16"]) == 0
