"""Ranking across runs: configurations are compared as their own runs saw them, each run scaled
onto the group's reference run, never by the fastest absolute row across runs."""

from __future__ import annotations

import pandas as pd
import pytest
from trial_rows import GATHER, S1, SPLIT16, VEC16, WPH, trial

from results.best import ranked, run_factors


def rows_of(run: str, times: dict[str, float], start: int, **extra) -> list[dict]:
    params = {"split": SPLIT16, "vec": VEC16, "warp_per_head": WPH, "gather": GATHER}
    return [
        trial("g", S1, "bf16", family, params[family], t, number=start + n, run_id=run, **extra)
        for n, (family, t) in enumerate(times.items())
    ]


def test_a_run_on_a_slower_gpu_is_scaled_by_the_configurations_it_shares() -> None:
    # run a: split 1.00, vec 1.05. run b, 3% slower all round: split 1.03, and warp_per_head
    # 1.01, 2% faster than split in the same process: it wins, though its absolute row is slower
    frame = pd.DataFrame(
        rows_of("a", {"split": 1.00, "vec": 1.05, "gather": 1.2}, 0)
        + rows_of("b", {"split": 1.03, "warp_per_head": 1.01}, 10)
    )
    order = list(ranked(frame)["family"])
    assert order[:2] == ["warp_per_head", "split"]
    factors = run_factors(frame)
    assert factors[frame["run_id"] == "a"].eq(1.0).all()  # the reference: the most configurations
    assert factors[frame["run_id"] == "b"].iloc[0] == pytest.approx(1.00 / 1.03)
    assert ranked(frame).set_index("family").loc["warp_per_head", "time_ms"] == 1.01  # as measured


def test_runs_sharing_no_configuration_keep_their_absolute_times() -> None:
    a = rows_of("a", {"split": 1.00, "vec": 1.05}, 0, copy_ms=0.50)
    b = rows_of("b", {"warp_per_head": 1.01}, 10, copy_ms=0.53)
    assert run_factors(pd.DataFrame(a + b)).eq(1.0).all()
    assert ranked(pd.DataFrame(a + b))["family"].iloc[0] == "split"


def test_a_run_is_linked_through_another_run_it_shares_configurations_with() -> None:
    # c shares nothing with the reference a, but shares vec with b, which shares split with a
    frame = pd.DataFrame(
        rows_of("a", {"split": 1.00, "gather": 1.3, "warp_per_head": 1.2}, 0)
        + rows_of("b", {"split": 1.10, "vec": 1.21}, 10)
        + rows_of("c", {"vec": 1.00}, 20)
    )
    factors = run_factors(frame)
    assert factors[frame["run_id"] == "c"].iloc[0] == pytest.approx(1.21 / 1.00 * 1.00 / 1.10)
