"""scripts/bench_frontier.py: the per-idea summary of a sweep, from its parquet (no GPU)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]


def sweep_rows() -> pd.DataFrame:
    base = {"B": 2, "T": 8, "NH": 8, "NH_KV": 2, "HD": 64, "dtype": "bf16", "MB": 1.0, "copy_ms": 0.010}
    rows = [
        {"role": "tuned", "family": "split", "config_key": "split[a]", "time_ms": 0.0100},
        {"role": "candidate", "family": "bulk", "config_key": "bulk[tile]", "time_ms": 0.0095},
        {"role": "candidate", "family": "bulk", "config_key": "bulk[persistent]", "time_ms": 0.0110},
        {"role": "candidate", "family": "bulk", "config_key": "bulk[evict]", "time_ms": 0.0120},
        {"role": "candidate", "family": "bulk", "config_key": "bulk[broken]", "time_ms": None},
        {"role": "tuned", "family": "split", "config_key": "split[a]", "time_ms": 0.0098},
    ]
    params = [(None, None), (0, "none"), (2, "none"), (0, "evict_first"), (1, "none"), (None, None)]
    statuses = ["ok", "ok", "ok", "ok", "wrong_result", "ok"]
    return pd.DataFrame(
        [
            base | row | {"p_blocks_per_sm": b, "p_l2": h, "status": s, "message": "" if s == "ok" else "bad"}
            for row, (b, h), s in zip(rows, params, statuses, strict=True)
        ]
    )


def test_render_names_the_winner_the_best_of_each_idea_and_the_failures(tmp_path: Path) -> None:
    sweep_rows().to_parquet(tmp_path / "frontier.parquet", index=False)
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "bench_frontier.py"),
            "--render",
            str(tmp_path / "frontier.parquet"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "B=2,T=8,NH=8,NH_KV=2,HD=64 bf16 (1 MB): copy 0.0100 ms"
    assert "1 failed, e.g. bulk[broken]: wrong_result bad" in lines[1]
    by_label = {line[:26].strip(): line for line in lines[2:]}
    assert "0.980x copy" in by_label["tuned winner"]  # the faster of its two timings
    assert "bulk[tile]" in by_label["best bulk"] and "0.950x" in by_label["best bulk"]
    assert "bulk[tile]" in by_label["bulk, a block per tile"]
    assert "bulk[persistent]" in by_label["bulk, persistent"] and "1.100x" in by_label["bulk, persistent"]
    assert "bulk[evict]" in by_label["bulk + L2 evict_first"]


def test_a_sweep_without_bulk_gives_the_best_of_each_family_only() -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    from bench_frontier import summarize

    rows = sweep_rows()
    rows = rows[rows["family"] != "bulk"].drop(columns=["p_blocks_per_sm", "p_l2"])
    tile = rows.iloc[[0]].assign(role="candidate", family="tile", config_key="tile[t]", time_ms=0.0090)
    text = summarize(pd.concat([rows, tile]), 0.010)
    assert "best tile" in text and "0.900x copy" in text
    assert "bulk" not in text


def test_the_device_time_pass_profiles_the_winner_and_the_fastest_candidates() -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    from bench_frontier import profiled_keys

    group = sweep_rows().to_dict("records")
    assert profiled_keys(group, 2) == ["split[a]", "bulk[tile]", "bulk[persistent]"]
    assert profiled_keys(group, 0) == ["split[a]"]


def test_the_summary_names_the_fastest_by_device_time() -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    from bench_frontier import summarize

    rows = sweep_rows()
    rows["device_us"] = [5.0, 4.5, None, None, None, 5.0]
    text = summarize(rows, 0.010)
    assert "winner by device time    5.00 us  split[a]" in text
    assert "fastest by device time   4.50 us  bulk[tile]" in text
    assert "device time" not in summarize(sweep_rows(), 0.010)
