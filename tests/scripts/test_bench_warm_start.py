"""scripts/bench_warm_start.py, the whole flow against a replayed recording."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "tuner"))
import tuner_fakes as F  # noqa: E402


def test_cold_warm_and_serial_runs_are_tabled(tmp_path: Path) -> None:
    F.write_recording(tmp_path / "rec", [F.SMALL], ["bf16"])
    out = tmp_path / "out"
    case = f"{F.SMALL.key}:bf16"
    argv = ["--replay", str(tmp_path / "rec"), "--case", case, "--trials", "10", "--out", str(out)]
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench_warm_start.py"), *argv],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    runs = json.loads((out / "warm_start.json").read_text())
    assert [(r["cache"], r["ahead"]) for r in runs] == [("cold", 8), ("warm", 8), ("cold", 1)]
    for r in runs:
        assert r["configs"] == 10 and r["shape"] == F.SMALL.key and len(r["first5"]) == 5
        assert r["best_all"] <= r["best_first5"] and r["first5_over_all"] >= 1.0
        assert r["configs_per_s"] > 0 and r["wall_s"] > 0
    assert "first 5 within 2% of 10 trials" in done.stdout
    assert (out / "warm_start.md").read_text().count("\n") == 2 + 3
