"""`import repkv_tune` where PyTorch is not installed (a service or tuner install): one error that
names what to install, not the bare `No module named 'torch'` of whichever module imported it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_importing_the_api_without_torch_names_the_extra_to_install() -> None:
    code = "import sys; sys.modules['torch'] = None; import repkv_tune"  # None: torch will not import
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    expected = "ModuleNotFoundError: repkv_tune, the PyTorch operators, needs PyTorch"
    assert last.startswith(expected), proc.stderr
    assert "pip install 'repkv-tune[torch,cuda13]'" in last, last
