"""scripts/bench_race.py's choice of pairs, without a GPU: per group the served configuration
and the fastest of another family that ran 1.5-4% behind it."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
from trial_rows import SPLIT16, VEC16, WPH, trial

from results.index import build_index
from variants import Shape, get_dtype

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import bench_race

BF16 = get_dtype("bf16")


def test_pairs_are_the_winner_and_the_best_of_another_family_within_the_gap() -> None:
    near, far, tied = Shape(8, 1024, 32, 8, 128), Shape(2, 512, 16, 4, 64), Shape(4, 256, 8, 2, 64)
    rows = [
        trial("g", near, "bf16", "split", SPLIT16, 1.00, number=0),
        trial("g", near, "bf16", "vec", VEC16, 1.025, number=1),  # 2.5% behind: a pair
        trial("g", near, "bf16", "warp_per_head", WPH, 1.03, number=2),
        trial("g", far, "bf16", "split", SPLIT16, 1.00, number=3),
        trial("g", far, "bf16", "vec", VEC16, 1.20, number=4),  # 20% behind: no pair
        trial("g", tied, "bf16", "split", SPLIT16, 1.00, number=5),
        trial("g", tied, "bf16", "vec", VEC16, 1.005, number=6),  # inside the race's margin: no pair
        trial("g", near, "fp16", "split", SPLIT16, 1.00, number=7),
        trial("g", near, "fp16", "vec", VEC16, 1.02, number=8),  # another dtype
    ]
    pairs = bench_race.race_pairs(build_index(pd.DataFrame(rows)), "g", BF16)
    assert [(p.shape, p.served.family, p.other.family) for p in pairs] == [(near, "split", "vec")]
    assert 1.02 < pairs[0].stored_gap < 1.03
    assert bench_race.race_pairs(build_index(pd.DataFrame(rows)), "h100", BF16) == []
