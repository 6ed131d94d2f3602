"""The dashboards' data on a shape's page: variants and blocks, the heat map, scatter and convergence."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from dashboard_data_helpers import BF16, frame
from trial_rows import S1, SPLIT16, VEC16, WPH, trial

from results.schema import Status
from service.dashboards import data


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


def test_heatmap_holds_the_best_ok_time_per_variant_and_block() -> None:
    rows = frame().iloc[0:0]
    rows = pd.DataFrame(
        [
            trial("g", S1, BF16, "vec", VEC16, 0.3),
            trial("g", S1, BF16, "vec", VEC16, 0.2, number=1),
            trial("g", S1, BF16, "vec", {**VEC16, "block": 128}, 0.25, number=2),
            trial("g", S1, BF16, "split", SPLIT16, 0.1, number=3),
            trial("g", S1, BF16, "split", SPLIT16, 0.01, status=Status.WRONG_RESULT, number=4),
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
    assert points["measured"].tolist() == [1, 2, 3, 4, 5]
    assert points["time_ms"].isna().tolist() == [False, False, False, True, True]
    curve = data.convergence(trials)
    assert curve["best_so_far_ms"].tolist() == pytest.approx([0.70, 0.10, 0.09, 0.09, 0.09])


def test_convergence_is_nan_until_the_first_success_and_per_series() -> None:
    rows = pd.DataFrame(
        [
            trial("g", S1, BF16, "vec", VEC16, 0.3, status=Status.CRASH, number=0),
            trial("g", S1, BF16, "vec", VEC16, 0.3, number=1),
            trial("g", S1, BF16, "vec", VEC16, 0.5, number=0, seed=1),
        ]
    )
    curve = data.convergence(data.shape_trials(rows, "g", S1, BF16))
    assert curve["series"].tolist() == ["seed 0"] * 2 + ["seed 1"]
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


# Searches ------------------------------------------------------------------------------------


def test_search_series_names_sampler_and_seed_and_tells_same_named_searches_apart() -> None:
    study = "repkv-0000/g/B=8,T=1024,NH=32,NH_KV=8,HD=128/bf16"
    rows = pd.DataFrame(
        [
            trial("g", S1, BF16, "vec", VEC16, 0.3, number=0, study=study, sampler="tpe", seed=0),
            trial("g", S1, BF16, "vec", VEC16, 0.3, number=1, study=study, sampler="grid", seed=0),
            trial("g", S1, BF16, "vec", VEC16, 0.3, number=2, study=study, sampler="tpe", seed=1),
            trial("g", S1, BF16, "vec", VEC16, 0.3, number=3, study="other", sampler="tpe", seed=0),
            trial("g", S1, BF16, "vec", VEC16, 0.3, number=4, study="x", sampler=None, seed=None),
            trial("g", S1, BF16, "vec", VEC16, 0.3, number=5, study="y", sampler=None, seed=None),
            trial(
                "g",
                S1,
                BF16,
                "vec",
                VEC16,
                0.3,
                number=6,
                study="leave-one-out",
                sampler="nearest",
                seed=None,
            ),
        ]
    )
    assert data.search_series(rows).tolist() == [
        "tpe seed 0, run 1/2",
        "grid seed 0",
        "tpe seed 1",
        "tpe seed 0, run 2/2",
        "run 1/2",
        "run 2/2",
        "nearest",
    ]


def test_measured_counts_the_rows_of_each_search_not_the_sampler_trial_numbers() -> None:
    # a sampler numbers its trials 0, 3, 9 (the others were pruned: already measured)
    rows = pd.DataFrame(
        [
            trial("g", S1, BF16, "vec", VEC16, 0.3, number=9, sampler="tpe"),
            trial("g", S1, BF16, "vec", VEC16, 0.5, number=0, sampler="tpe"),
            trial("g", S1, BF16, "vec", VEC16, 0.2, number=3, sampler="tpe"),
            trial("g", S1, BF16, "vec", VEC16, 0.4, number=0, sampler="grid"),
            trial("g", S1, BF16, "vec", VEC16, 0.1, number=1, sampler="grid"),
        ]
    )
    trials = data.shape_trials(rows, "g", S1, BF16)
    tpe = trials[trials["series"] == "tpe seed 0"]
    assert tpe["measured"].tolist() == [1, 2, 3] and tpe["trial_number"].tolist() == [0, 3, 9]
    curve = data.convergence(trials)
    assert curve[curve["series"] == "tpe seed 0"]["measured"].tolist() == [1, 2, 3]
    assert curve[curve["series"] == "tpe seed 0"]["best_so_far_ms"].tolist() == pytest.approx([0.5, 0.2, 0.2])
    assert curve[curve["series"] == "grid seed 0"]["best_so_far_ms"].tolist() == pytest.approx([0.4, 0.1])


def test_heatmap_winner_is_the_fastest_cell_of_one_run() -> None:
    trials = data.shape_trials(frame(), "h100", S1, BF16)
    winner = data.heatmap_winner(trials)
    assert winner == {
        "variant": "split items=4 load=ldg store=stcs vec_bytes=16",
        "block_size": 512,
        "time_ms": pytest.approx(0.09),
    }
    assert data.heatmap_winner(trials.iloc[0:0]) is None


def test_heatmap_winner_is_the_configuration_served_where_runs_disagree() -> None:
    """vec timed 0.09 ms by an older run and 0.12 ms by the newest, which timed split at 0.11
    ms: vec stands by its newest run, so split is served and named the winner, and the star
    marks split's cell, not vec's (the lowest time of the heat map)."""
    old, new = {"run_id": "synthetic-old"}, {"run_id": "synthetic-new"}
    rows = pd.DataFrame(
        [
            trial("g", S1, BF16, "vec", VEC16, 0.09, number=0, **old),
            trial("g", S1, BF16, "vec", VEC16, 0.12, number=10, **new),
            trial("g", S1, BF16, "split", SPLIT16, 0.11, number=11, **new),
        ]
    )
    trials = data.shape_trials(rows, "g", S1, BF16)
    served = data.overview(trials).iloc[0]["config_key"]
    assert served.startswith("split[")
    assert data.heatmap(trials).loc["vec load=plain store=plain vec_bytes=16", 256] == pytest.approx(0.09)
    assert data.heatmap_winner(trials) == {
        "variant": "split items=4 load=ldg store=stcs vec_bytes=16",
        "block_size": 512,
        "time_ms": pytest.approx(0.11),
    }
