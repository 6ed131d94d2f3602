from __future__ import annotations

import math

import pandas as pd
import pytest
from conftest import S1, SPLIT16, VEC16, WPH, h100_rows, other_rows, trial

from service.dashboards import data

BF16 = "bf16"


def frame() -> pd.DataFrame:
    return pd.DataFrame(h100_rows() + other_rows())


def test_block_size_prefers_the_recorded_launch_block_then_params() -> None:
    rows = pd.DataFrame(
        [
            trial("g", S1, BF16, "vec", VEC16, 0.1),
            {**trial("g", S1, BF16, "warp_per_head", WPH, 0.1), "block": None},
            {**trial("g", S1, BF16, "vec", VEC16, 0.1), "block": None},
            {**trial("g", S1, BF16, "vec", VEC16, 0.1), "block": None, "params": "{}"},
        ]
    )
    assert data.block_size(rows).tolist() == [256, 128, 256, pd.NA]


def test_variant_drops_the_block_parameter() -> None:
    rows = pd.DataFrame(
        [trial("g", S1, BF16, "vec", VEC16, 0.1), trial("g", S1, BF16, "warp_per_head", WPH, 0.1)]
    )
    assert data.variant(rows).tolist() == [
        "vec load=plain store=plain vec_bytes=16",
        "warp_per_head load=plain store=plain vec_bytes=16",
    ]


def test_overview_has_winner_ratio_and_speedup() -> None:
    table = data.overview(frame())
    row = table[(table["gpu"] == "h100") & (table["B"] == 8) & (table["dtype"] == BF16)].iloc[0]
    assert row["config_key"].startswith("split[") and row["trials"] == 5
    assert row["speedup_vs_baseline"] == pytest.approx(0.70 / 0.09)
    assert row["shape"] == "B=8 T=1024 NH=32 NH_KV=8 HD=128"
    assert len(table) == 6
    assert data.overview(frame().iloc[0:0]).empty


def test_heatmap_holds_the_best_ok_time_per_variant_and_block() -> None:
    rows = frame().iloc[0:0]
    rows = pd.DataFrame(
        [
            trial("g", S1, BF16, "vec", VEC16, 0.3),
            trial("g", S1, BF16, "vec", VEC16, 0.2, number=1),
            trial("g", S1, BF16, "vec", {**VEC16, "block": 128}, 0.25, number=2),
            trial("g", S1, BF16, "split", SPLIT16, 0.1, number=3),
            trial("g", S1, BF16, "split", SPLIT16, 0.01, status="wrong_result", number=4),
        ]
    )
    trials = data.shape_trials(rows, "g", S1, BF16)
    table = data.heatmap(trials)
    assert list(table.index) == [
        "split items=4 load=ldg store=stcs vec_bytes=16",
        "vec load=plain store=plain vec_bytes=16",
    ]
    assert table.loc["vec load=plain store=plain vec_bytes=16", 256] == pytest.approx(0.2)
    assert table.loc["vec load=plain store=plain vec_bytes=16", 128] == pytest.approx(0.25)
    assert math.isnan(table.loc["split items=4 load=ldg store=stcs vec_bytes=16", 128])
    assert table.loc["split items=4 load=ldg store=stcs vec_bytes=16", 512] == pytest.approx(0.1)


def test_scatter_and_convergence() -> None:
    trials = data.shape_trials(frame(), "h100", S1, BF16)
    points = data.scatter(trials)
    assert points["trial_number"].tolist() == [0, 1, 2, 3, 4]
    assert points["time_ms"].isna().tolist() == [False, False, False, True, True]
    curve = data.convergence(trials)
    assert curve["best_so_far_ms"].tolist() == pytest.approx([0.70, 0.10, 0.09, 0.09, 0.09])


def test_convergence_is_nan_until_the_first_success_and_per_series() -> None:
    rows = pd.DataFrame(
        [
            trial("g", S1, BF16, "vec", VEC16, 0.3, status="crash", number=0),
            trial("g", S1, BF16, "vec", VEC16, 0.3, number=1),
            trial("g", S1, BF16, "vec", VEC16, 0.5, number=0, seed=1),
        ]
    )
    curve = data.convergence(data.shape_trials(rows, "g", S1, BF16))
    assert curve["series"].tolist() == ["synthetic-test seed=0"] * 2 + ["synthetic-test seed=1"]
    assert math.isnan(curve["best_so_far_ms"].iloc[0]) and curve["best_so_far_ms"].iloc[1] == 0.3


def test_trial_number_falls_back_to_timestamp_order() -> None:
    rows = pd.DataFrame(
        [
            trial("g", S1, BF16, "vec", VEC16, 0.3, number=5, trial=None),
            trial("g", S1, BF16, "vec", VEC16, 0.3, number=2, trial=None),
        ]
    )
    trials = data.shape_trials(rows, "g", S1, BF16)
    assert trials["trial_number"].tolist() == [0, 1] and trials["time_ms"].tolist() == [0.3, 0.3]


def test_reference_times() -> None:
    refs = data.reference_times(data.shape_trials(frame(), "h100", S1, BF16))
    assert refs["baseline_ms"] == pytest.approx(0.70) and refs["copy_ms"] > 0


def test_gpu_comparison_and_family_best() -> None:
    table = data.gpu_comparison(frame(), S1, BF16)
    assert table["gpu"].tolist() == ["h100", "h200", "l4"]
    assert table["family"].tolist() == ["split", "vec", "split"]
    best = data.family_best(frame(), S1, BF16)
    h100 = best[best["gpu"] == "h100"].set_index("family")["time_ms"]
    assert h100.to_dict() == pytest.approx({"naive": 0.70, "split": 0.09, "vec": 0.10})
