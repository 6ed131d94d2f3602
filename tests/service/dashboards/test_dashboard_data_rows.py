"""The dashboards' data: which rows the views read and survive, and the store index's GPUs and shapes."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from dashboard_data_helpers import BF16, frame
from trial_rows import S1, S2, SPLIT16, VEC16, h100_rows, other_rows, trial

import variants
from results.index import StoreIndex, build_index
from results.leave_one_out import rule_quality
from results.schema import DEFAULT_HOLD_US
from results.store import empty_frame
from service.dashboards import data

# Rows the dashboards must survive (whether or not loading validates them) ------------------


def bad_rows() -> list[dict]:
    """Rows no dashboard can place: null GPU, dtype or family, an unknown dtype, a broken shape."""
    good = trial("h100", S1, BF16, "vec", VEC16, 0.01, number=7)
    return [
        {**good, "gpu": None},
        {**good, "dtype": None},
        {**good, "family": None},
        {**good, "status": None},
        {**good, "dtype": "fp8"},
        {**good, "B": None},
        {**good, "NH_KV": 5},
        {**good, "gpu": math.nan},
    ]


def test_usable_drops_rows_without_gpu_dtype_family_or_a_valid_shape() -> None:
    rows = pd.DataFrame(h100_rows() + bad_rows())
    kept = data.usable(rows)
    assert len(kept) == len(h100_rows())
    assert kept["B"].dtype == "int64" and set(kept["gpu"]) == {"h100"}
    clean = pd.DataFrame(h100_rows())
    assert data.usable(clean) is clean  # nothing to drop: the frame itself, not a copy
    for bad in bad_rows():  # each on its own
        assert len(data.usable(pd.DataFrame([*h100_rows(), bad]))) == len(h100_rows()), bad
    assert data.usable(clean.drop(columns=["family"])).empty


def test_every_view_ignores_bad_rows() -> None:
    rows = pd.DataFrame(h100_rows() + other_rows() + bad_rows())
    # the bad rows claim 0.01 ms, faster than any good row: none of them may win anywhere
    assert data.overview(rows).equals(data.overview(frame()))
    assert data.gpu_comparison(rows, S1, BF16)["time_ms"].tolist() == pytest.approx([0.09, 0.07, 0.20])
    assert data.family_best(rows, S1, BF16)["time_ms"].min() == pytest.approx(0.07)
    assert len(data.shape_trials(rows, "h100", S1, BF16)) == 5
    assert data.family_vs_best(rows)["best_ms"].min() == pytest.approx(0.05)
    assert data.bandwidth(rows, "h100")["time_ms"].tolist() == pytest.approx([0.05, 0.18, 0.09])


# The store index: which GPU, what an untuned shape gets -------------------------------------


def index_of(rows: list[dict]) -> StoreIndex:
    return build_index(pd.DataFrame(rows) if rows else empty_frame())


def test_default_gpu_is_the_only_gpu_or_the_only_one_that_tuned_the_shape() -> None:
    assert data.default_gpu(index_of(h100_rows())) == "h100"
    several = index_of(h100_rows() + other_rows())
    assert data.default_gpu(several) is None
    assert data.default_gpu(several, S1, variants.get_dtype(BF16)) is None  # three GPUs tuned it
    assert data.default_gpu(several, S1, variants.get_dtype("fp32")) == "h100"
    assert data.default_gpu(index_of([])) is None


def test_tuned_shapes_smallest_first() -> None:
    index = index_of(h100_rows() + other_rows())
    assert data.tuned_shapes(index, "h100") == [S2, S1]
    assert data.tuned_shapes(index, "h200") == [S1]


def test_served_instead_is_what_best_serves_on_an_untuned_shape() -> None:
    index = index_of(h100_rows() + other_rows())
    shape = variants.Shape(2, 3000, 32, 8, 128)
    served = data.served_instead(index, "h100", shape, variants.get_dtype(BF16))
    assert served is not None
    assert served["match"] == "nearest" and served["tuned_shape"] == S1 and served["tuned_dtype"] == BF16
    assert served["config_key"].startswith("split[") and served["time_ms"] == pytest.approx(0.09)
    assert served["distance"] > 0 and served["tier"] == 0 and served["rank"] == 0
    assert served["grid"] > 0 and served["block"] == 512
    assert served["source_hash"] == variants.get_family("split").source_hash
    assert served["rule_quality"] == rule_quality(index, "h100").at(served["tier"])
    assert data.served_instead(index, "nope", shape, variants.get_dtype(BF16)) is None

    nearest = data.nearest_tuned(index, "h100", shape, variants.get_dtype(BF16))
    assert nearest["serves"].tolist() == [True, False, False]
    assert (nearest.iloc[0]["B"], nearest.iloc[0]["dtype"]) == (8, BF16)
    assert nearest.iloc[-1]["tier"] == 2  # fp32: another dtype comes last
    assert data.nearest_tuned(index, "nope", shape, variants.get_dtype(BF16)).empty


def test_views_that_compare_times_read_only_the_rows_timed_as_the_group_is_served() -> None:
    """A group with rows timed with the tuner's hold: the heat map, each family's best and the
    references leave out its rows timed otherwise (faster or not); a group without any held
    row keeps all of its rows."""
    held = {"hold_us": DEFAULT_HOLD_US}
    rows = pd.DataFrame(
        [
            trial("g", S1, BF16, "vec", VEC16, 0.20, number=0, **held),
            trial("g", S1, BF16, "split", SPLIT16, 0.25, number=1, **held),
            trial("g", S1, BF16, "split", SPLIT16, 0.05, number=2),  # unheld: not compared
            trial("g", S1, BF16, "naive", {"block": 128}, 0.01, number=3, hold_us=0.0),
            trial("g", S2, BF16, "vec", VEC16, 0.30, number=0),  # a group without held rows
        ]
    )
    trials = data.shape_trials(rows, "g", S1, BF16)
    assert data.heatmap_winner(trials)["time_ms"] == pytest.approx(0.20)
    assert "naive" not in data.heatmap(trials).index.str.split().str[0].tolist()
    assert data.reference_times(trials)["baseline_ms"] is None
    best = data.family_best(rows, S1, BF16).set_index("family")["ratio_to_best"]
    assert best.to_dict() == pytest.approx({"vec": 1.0, "split": 1.25})
    table = data.family_vs_best(rows, "g")
    assert table[table["B"] == 1]["time_ms"].tolist() == [pytest.approx(0.30)]


def test_every_gpu_keeps_its_place_whichever_gpus_a_view_holds() -> None:
    rows = frame()
    order = {"h100": 0, "h200": 1, "l4": 2}
    assert data.gpu_order(rows) == order
    assert data.gpu_order(pd.DataFrame(other_rows())) == {"h200": 0, "l4": 1}
    assert dict(zip(data.overview(rows)["gpu"], data.overview(rows)["gpu_order"], strict=True)) == order
    assert set(data.overview(rows, gpu="l4")["gpu_order"]) == {2}
    assert set(data.bandwidth(rows, "l4")["gpu_order"]) == {2}
    assert set(data.family_vs_best(rows, "h200")["gpu_order"]) == {1}
    assert data.gpu_comparison(rows, S1, BF16)["gpu_order"].tolist() == [0, 1, 2]
    best = data.family_best(rows, S1, BF16)
    assert best["gpu_order"].is_monotonic_increasing and set(best["gpu_order"]) == {0, 1, 2}


def test_shapes_in_order_lists_each_shape_once_smallest_first_across_gpus() -> None:
    table = data.overview(frame())
    assert data.shapes_in_order(table) == ["1×1024 32/8/128", "8×1024 32/8/128"]
    assert data.shapes_in_order(table.iloc[::-1]) == ["1×1024 32/8/128", "8×1024 32/8/128"]
    assert data.shapes_in_order(table.iloc[0:0]) == []


def test_the_dashboards_draw_cold_rows_only() -> None:
    rows = [
        trial("h100", S1, "bf16", "split", SPLIT16, 0.08, number=0),
        trial("h100", S1, "bf16", "vec", VEC16, 0.05, number=1, l2="fed"),
    ]
    frame = pd.DataFrame(rows)
    assert list(data.usable(frame)["family"]) == ["split"]
    assert list(data.shape_trials(frame, "h100", S1, "bf16")["family"]) == ["split"]
    assert list(data.overview(frame)["family"]) == ["split"]
