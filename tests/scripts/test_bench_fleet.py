"""scripts/bench_fleet.py: its pure parts, and the whole flow against a replayed recording."""

from __future__ import annotations

import math
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "tuner"))
import tuner_fakes as F  # noqa: E402
from load_script import load_script  # noqa: E402

bench = load_script("scripts/bench_fleet.py")
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _frame(keys: list[str], seconds: list[float], ratios: list[float]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "config_key": keys,
            "timestamp": [T0 + timedelta(seconds=s) for s in seconds],
            "status": ["ok"] * len(keys),
            "ratio_to_copy": ratios,
            "run_id": ["r"] * len(keys),
        }
    )


def test_rates_winners_and_twice_measured_configurations() -> None:
    one = bench.stats(_frame(["a", "b", "c", "d", "e"], [0, 1, 2, 3, 4], [1.2, 1.0, 1.1, 1.3, 1.4]), 1, 10.0)
    assert one.per_s == 1.0 and one.per_s_wall == 0.5
    assert one.winner == "b" and one.winner_ratio == 1.0 and not one.twice
    fleet = bench.stats(
        _frame(["f", "g", "h", "i", "j"], [0, 0.5, 1, 1.5, 2], [1.01, 1.2, 1.3, 1.4, 1.5]), 2, 6.0
    )
    v = bench.verdict(one, fleet)
    assert v.ratio == 2.0 and v.same_winner and not v.measured_twice and v.meets_target
    twice = bench.stats(_frame(["a", "a"], [0, 1], [1.0, 1.0]), 2, 1.0)
    assert twice.twice and bench.verdict(one, twice).measured_twice
    worse = bench.stats(_frame(["x", "y"], [0, 1], [1.5, 1.6]), 2, 1.0)
    assert not bench.verdict(one, worse).same_winner and not bench.verdict(one, worse).meets_target
    assert "misses the target" in bench.report(one, twice, bench.verdict(one, twice))
    assert math.isinf(bench.stats(pd.DataFrame(), 1, 1.0).winner_ratio)


def test_the_commands_name_fresh_studies_the_same_budget_and_no_bundled_answers(tmp_path: Path) -> None:
    argv = bench.tuner_argv(
        shape=bench.SHAPE, dtype="bf16", trials=120, results=tmp_path, study="s", seed=0, devices="0,1"
    )
    assert argv[:2] == ["-m", "tuner"] and "--no-bundled" in argv
    assert argv[argv.index("--devices") + 1] == "0,1" and argv[argv.index("--trials") + 1] == "120"
    single = bench.tuner_argv(
        shape="x", dtype="bf16", trials=1, results=tmp_path, study="t", seed=0, devices=None
    )
    assert "--devices" not in single and single[single.index("--device") + 1] == "0"


def test_the_whole_flow_on_a_replay(tmp_path: Path, capsys) -> None:
    recording = tmp_path / "recording"
    F.write_recording(recording, [F.SMALL], ["bf16"])
    rc = bench.main(
        [
            *["--replay", str(recording), "--shape", F.SMALL.key, "--trials", "16", "--devices", "0,1"],
            *[
                "--replay-delay",
                "0.1",
                "--work-dir",
                str(tmp_path / "work"),
                "--json",
                str(tmp_path / "b.json"),
            ],
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "no configuration measured twice" in out and "| 2 workers | 16 | 16 | 1 |" in out
    assert (tmp_path / "b.json").exists()


if __name__ == "__main__":
    pytest.main([__file__])
