from __future__ import annotations

import math

import pandas as pd
import pytest
from trial_rows import GATHER, NAIVE128, S1, S2, SPLIT16, VEC16, rule_quality_rows, trial

from results.index import build_index, shape_tuple
from results.leave_one_out import leave_one_out, rule_quality, summarize
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
    lone = [trial("g", S1, "bf16", "vec", VEC16, 1.0), trial("g", S1, "bf16", "split", SPLIT16, 1.1)]
    table = leave_one_out(pd.DataFrame(lone))
    assert len(table) == 1 and table["served_config"].isna().all()
    assert summarize(table).answered == 0 and math.isnan(summarize(table).median_slowdown)


def test_a_group_of_one_family_searched_answers_others_but_is_not_judged() -> None:
    """A partial group's best is one family's best, not the optimum: judged against it, what
    the rule serves read faster than it is (vec served at 1.2x split's optimum read 1.0x)."""
    data = [
        trial("g", S1, "bf16", "split", SPLIT16, 1.0),
        trial("g", S1, "bf16", "vec", VEC16, 1.2),
        trial("g", S2, "bf16", "vec", VEC16, 0.5),  # `--family vec` alone at S2
    ]
    assert build_index(pd.DataFrame(data)).groups[("g", shape_tuple(S2), "bf16")].partial
    table = leave_one_out(pd.DataFrame(data))
    assert list(table["B"]) == [S1.B]  # S2 is no target, but answers S1
    assert table["served_from"].iloc[0] == str(S2) and table["slowdown"].iloc[0] == pytest.approx(1.2)
    assert rule_quality(build_index(pd.DataFrame(data)), "g").tuned == 1


def test_on_exhaustive_synthetic_data_every_slowdown_is_at_least_one() -> None:
    frame = synthetic_frame(gpus=("h100",), dtypes=("bf16",), trials=None, seed=1)
    table = leave_one_out(frame)
    summary = summarize(table)
    assert summary.answered == summary.shapes == 12
    assert (table["slowdown"].dropna() >= 1.0).all()


def test_rule_quality_per_tier_on_a_store_worked_out_by_hand() -> None:
    quality = rule_quality(build_index(pd.DataFrame(rule_quality_rows())), "g")
    assert (quality.gpu, quality.tuned, quality.unanswered) == ("g", 5, 0)
    same_layout, other_layout, other_dtype = quality.tiers
    # slow-downs 1.2, 1.25 and 1.1; the 90th percentile lies 0.8 of the way from 1.2 to 1.25
    assert (same_layout.tier, same_layout.held_out, same_layout.judged, same_layout.not_judged) == (
        0,
        3,
        3,
        0,
    )
    assert same_layout.median_slowdown == pytest.approx(1.2)
    assert same_layout.p90_slowdown == pytest.approx(1.24)
    assert same_layout.worst_slowdown == pytest.approx(1.25) and same_layout.reason is None
    # HD=64 was served vec, which it never measured: counted, not judged
    assert (other_layout.held_out, other_layout.judged, other_layout.not_judged) == (1, 0, 1)
    assert other_layout.median_slowdown is None and other_layout.worst_slowdown is None
    assert "never measured" in (other_layout.reason or "")
    assert other_dtype.judged == 1 and other_dtype.reason is None
    assert other_dtype.median_slowdown == other_dtype.p90_slowdown == other_dtype.worst_slowdown
    assert other_dtype.worst_slowdown == pytest.approx(8.0 / 6.0)
    assert quality.at(2) is other_dtype


def test_rule_quality_is_computed_once_per_index_for_every_gpu() -> None:
    index = build_index(pd.DataFrame(rule_quality_rows()))
    assert index.rule_quality == {}
    first = rule_quality(index, "g")
    assert set(index.rule_quality) == {"g", "solo"}
    assert rule_quality(index, "g") is first
    unknown = rule_quality(index, "nope")  # answered, not cached
    assert unknown.tuned == 0 and "nope" not in index.rule_quality
    assert unknown.at(0).reason == "nope has no tuned (shape, dtype)"


def test_one_tuned_shape_is_not_enough_for_rule_quality() -> None:
    quality = rule_quality(build_index(pd.DataFrame(rule_quality_rows())), "solo")
    assert (quality.tuned, quality.unanswered) == (1, 1)
    for tier in quality.tiers:
        assert (tier.held_out, tier.judged) == (0, 0)
        assert tier.median_slowdown is None and tier.p90_slowdown is None and tier.worst_slowdown is None
        assert tier.reason == "solo has one tuned (shape, dtype): left out, nothing remains to answer it"


def test_a_tier_nothing_was_answered_from_says_so() -> None:
    data = [
        trial("g", S1, "bf16", "split", SPLIT16, 1.0),
        trial("g", S1, "bf16", "naive", NAIVE128, 9.0),
        trial("g", S2, "bf16", "vec", VEC16, 0.5),
        trial("g", S2, "bf16", "naive", NAIVE128, 9.0),
    ]
    quality = rule_quality(build_index(pd.DataFrame(data)), "g")
    assert quality.at(0).held_out == 2 and quality.at(0).judged == 0
    assert (
        quality.at(2).reason == "none of the 2 tuned (shape, dtype) of g, left out, was answered from tier 2"
    )
