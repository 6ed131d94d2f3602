from __future__ import annotations

import math

import pandas as pd
import pytest
from trial_rows import GATHER, NAIVE128, S1, S2, SPLIT16, VEC16, trial

from results.leave_one_out import leave_one_out, summarize
from service.synthetic import synthetic_frame


def rows() -> list[dict]:
    s3 = S2.__class__(2, 1024, 32, 8, 128)
    return [
        trial("g", S1, "bf16", "split", SPLIT16, 1.0),
        trial("g", S1, "bf16", "vec", VEC16, 1.2),
        trial("g", S2, "bf16", "vec", VEC16, 0.5),
        trial("g", S2, "bf16", "split", SPLIT16, 0.6),
        trial("g", s3, "bf16", "gather", GATHER, 0.3),
        trial("g", s3, "bf16", "naive", NAIVE128, 0.9),
    ]


def test_each_shape_is_answered_from_the_others() -> None:
    table = leave_one_out(pd.DataFrame(rows())).set_index("B")
    # B=8 is answered from B=2 (closest): gather, never measured at B=8
    assert table.loc[8, "served_from"].startswith("B=2,") and math.isnan(table.loc[8, "slowdown"])
    # B=1 is answered from B=2: gather, not measured at B=1 either
    assert table.loc[1, "served_config"].startswith("gather[")
    # B=2 is answered from B=1 (distance 2, closer than B=8 at 4)
    assert table.loc[2, "served_from"].startswith("B=1,")


def test_slowdown_is_served_time_over_optimum() -> None:
    data = [
        trial("g", S1, "bf16", "split", SPLIT16, 1.0),
        trial("g", S1, "bf16", "vec", VEC16, 1.25),
        trial("g", S2, "bf16", "vec", VEC16, 0.5),
        trial("g", S2, "bf16", "split", SPLIT16, 0.6),
    ]
    table = leave_one_out(pd.DataFrame(data)).set_index("B")
    assert table.loc[8, "served_config"].startswith("vec[") and table.loc[8, "slowdown"] == pytest.approx(
        1.25
    )
    assert table.loc[1, "served_config"].startswith("split[") and table.loc[1, "slowdown"] == pytest.approx(
        1.2
    )
    summary = summarize(leave_one_out(pd.DataFrame(data)))
    assert summary.shapes == 2 and summary.answered == 2 and summary.measured == 2
    assert summary.median_slowdown == pytest.approx(1.225) and summary.worst_slowdown == pytest.approx(1.25)
    assert summary.within_5_percent == 0


def test_a_lone_shape_cannot_be_answered() -> None:
    table = leave_one_out(pd.DataFrame([trial("g", S1, "bf16", "vec", VEC16, 1.0)]))
    assert table["served_config"].isna().all()
    assert summarize(table).answered == 0 and math.isnan(summarize(table).median_slowdown)


def test_on_exhaustive_synthetic_data_every_slowdown_is_at_least_one() -> None:
    frame = synthetic_frame(gpus=("h100",), dtypes=("bf16",), trials=None, seed=1)
    table = leave_one_out(frame)
    summary = summarize(table)
    assert summary.answered == summary.shapes == 12
    assert (table["slowdown"].dropna() >= 1.0).all()
