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


def test_a_run_that_measures_leaders_again_decides_between_them() -> None:
    # b timed vec once at 0.97 (a low outlier: on a's scale, b is linked through warp_per_head);
    # c, the newest, timed vec and split together: split ahead. vec stands by c's timing, not
    # by its fastest row across runs, so split is served.
    frame = pd.DataFrame(
        rows_of("a", {"split": 1.00, "gather": 1.2, "warp_per_head": 1.3}, 0)
        + rows_of("b", {"vec": 0.97, "warp_per_head": 1.3}, 10)
        + rows_of("c", {"vec": 1.02, "split": 1.00, "gather": 1.2}, 20)
    )
    order = ranked(frame)
    assert list(order["family"][:2]) == ["split", "vec"]
    assert order.set_index("family").loc["vec", "run_id"] == "c"
    # without c's re-measurement, b's row stands and vec leads
    assert ranked(frame[frame["run_id"] != "c"])["family"].iloc[0] == "vec"


def test_a_configuration_stands_by_its_newest_run_even_where_an_older_one_was_faster() -> None:
    frame = pd.DataFrame(
        rows_of("a", {"split": 1.00, "vec": 1.10}, 0) + rows_of("b", {"split": 1.05, "vec": 1.10}, 10)
    )
    row = ranked(frame).set_index("family").loc["split"]
    assert (row["run_id"], row["time_ms"]) == ("b", 1.05)
