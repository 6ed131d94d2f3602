from __future__ import annotations

import math

import pandas as pd
import pytest
from conftest import S1, S2, SPLIT16, VEC16, WPH, h100_rows, other_rows, trial

import variants
from results.index import StoreIndex, build_index
from results.leave_one_out import rule_quality
from results.schema import DEFAULT_HOLD_US, Status
from results.store import empty_frame
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


def test_overview_links_to_the_current_source() -> None:
    table = data.overview(frame())
    h200 = table[table["gpu"] == "h200"].iloc[0]
    # measured with an older source: the link goes to the family's current one
    assert h200["source_hash"] == variants.get_family("vec").source_hash
    assert not h200["source_current"]
    assert table[table["gpu"] == "h100"]["source_current"].all()


def test_overview_orders_shapes_smallest_first_then_dtype() -> None:
    table = data.overview(frame())
    h100 = table[table["gpu"] == "h100"]
    assert list(zip(h100["B"], h100["dtype"], strict=True)) == [(1, "bf16"), (8, "fp32"), (8, "bf16")]
    assert h100["short_shape"].tolist() == ["1×1024 32/8/128", "8×1024 32/8/128", "8×1024 32/8/128"]
    assert h100["bytes_moved"].tolist() == [
        S2.bytes_moved(variants.get_dtype("bf16")),
        S1.bytes_moved(variants.get_dtype("fp32")),
        S1.bytes_moved(variants.get_dtype("bf16")),
    ]


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


# Heat map, families, bandwidth ---------------------------------------------------------------


def test_heatmap_winner_is_the_fastest_cell() -> None:
    trials = data.shape_trials(frame(), "h100", S1, BF16)
    winner = data.heatmap_winner(data.heatmap(trials))
    assert winner == {
        "variant": "split items=4 load=ldg store=stcs vec_bytes=16",
        "block_size": 512,
        "time_ms": pytest.approx(0.09),
    }
    assert data.heatmap_winner(pd.DataFrame()) is None


def test_family_vs_best_divides_each_familys_best_by_the_shapes_best() -> None:
    table = data.family_vs_best(frame(), "h100")
    s1 = table[(table["B"] == 8) & (table["dtype"] == BF16)].set_index("family")
    assert s1["ratio_to_best"].to_dict() == pytest.approx(
        {"naive": 0.70 / 0.09, "vec": 0.10 / 0.09, "split": 1.0}
    )
    assert list(s1.index) == ["naive", "vec", "split"]  # the registry's order
    s2 = table[table["B"] == 1].set_index("family")
    assert s2["ratio_to_best"].to_dict() == pytest.approx({"naive": 4.0, "gather": 1.0})
    assert table["short_shape"].iloc[0] == "1×1024 32/8/128"  # smallest shape first
    assert set(data.family_vs_best(frame())["gpu"]) == {"h100", "h200", "l4"}
    assert data.family_vs_best(frame(), "nope").empty


def test_family_best_ratio_to_the_gpus_best() -> None:
    best = data.family_best(frame(), S1, BF16)
    h100 = best[best["gpu"] == "h100"].set_index("family")["ratio_to_best"]
    assert h100.to_dict() == pytest.approx({"naive": 0.70 / 0.09, "split": 1.0, "vec": 0.10 / 0.09})


def test_bandwidth_per_shape_against_the_copy_and_the_baseline() -> None:
    table = data.bandwidth(frame(), "h100")
    assert table["B"].tolist() == [1, 8, 8] and table["dtype"].tolist() == ["bf16", "fp32", "bf16"]
    row = table.iloc[2]
    moved = S1.bytes_moved(variants.get_dtype(BF16))
    assert row["bytes_moved"] == moved
    assert row["gbps"] == pytest.approx(moved / (0.09 * 1e6))
    assert row["copy_gbps"] == pytest.approx(3000.0)  # the synthetic copy moves 3e9 bytes per ms
    assert row["baseline_gbps"] == pytest.approx(moved / (0.70 * 1e6))
    assert math.isnan(table.iloc[1]["baseline_gbps"])  # fp32: llm.c's kernel was not measured
    assert math.isnan(row["ratio_to_empty_launch"])  # rows from before the empty launch was timed
    assert data.bandwidth(frame(), "nope").empty
    timed = pd.DataFrame([{**r, "empty_launch_ms": 0.003} for r in h100_rows() + other_rows()])
    assert data.bandwidth(timed, "h100").iloc[2]["ratio_to_empty_launch"] == pytest.approx(0.09 / 0.003)


def test_peak_bandwidth_only_for_a_known_device() -> None:
    assert data.peak_bandwidth(["NVIDIA H200"]) == ("NVIDIA H200", 4800.0)
    assert data.peak_bandwidth(["NVIDIA H100 80GB HBM3"]) == ("NVIDIA H100 80GB HBM3", 3350.0)
    assert data.peak_bandwidth([]) is None
    assert data.peak_bandwidth(["SYNTHETIC H100"]) is None
    assert data.peak_bandwidth(["NVIDIA H200", "NVIDIA H100 80GB HBM3"]) is None  # one label, two devices
    rows = pd.DataFrame([{**r, "gpu_name": "NVIDIA H200"} for r in other_rows()])
    assert data.gpu_names(rows, "h200") == ["NVIDIA H200"] and data.gpu_names(rows, "x") == []


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
    assert data.heatmap_winner(data.heatmap(trials))["time_ms"] == pytest.approx(0.20)
    assert "naive" not in data.heatmap(trials).index.str.split().str[0].tolist()
    assert data.reference_times(trials)["baseline_ms"] is None
    best = data.family_best(rows, S1, BF16).set_index("family")["ratio_to_best"]
    assert best.to_dict() == pytest.approx({"vec": 1.0, "split": 1.25})
    table = data.family_vs_best(rows, "g")
    assert table[table["B"] == 1]["time_ms"].tolist() == [pytest.approx(0.30)]


def test_overview_board_draws_ratios_held_to_cudamemcpy_alone_hollow() -> None:
    from service.dashboards import draw

    rows = pd.DataFrame(
        [
            trial("h200", S1, BF16, "vec", VEC16, 0.1, copy_method="fastest"),
            trial("h200", S2, BF16, "vec", VEC16, 0.02),  # timed before: cudaMemcpyAsync alone
        ]
    )
    table = data.overview(rows)
    assert table.set_index("short_shape")["copy_method"].notna().sum() == 1
    figure = draw.overview_board(table)
    ratio = next(t for t in figure.data if t.xaxis == "x3")
    symbols = dict(zip(ratio.y, ratio.marker.symbol, strict=True))
    hollow = {row.short_shape: symbols[row.short_shape].endswith("-open") for row in table.itertuples()}
    assert hollow == {row.short_shape: pd.isna(row.copy_method) for row in table.itertuples()}
    assert {row[1] for row in ratio.customdata} == {
        "the faster of cudaMemcpyAsync and a copy kernel",
        "cudaMemcpyAsync alone",
    }
    assert "hollow: the copy was cudaMemcpyAsync alone" in figure.layout.xaxis3.title.text


def test_overview_gives_each_winner_its_percent_of_the_gpus_peak() -> None:
    rows = pd.DataFrame(
        [
            {**trial("h200", S1, BF16, "split", SPLIT16, 0.09), "gpu_name": "NVIDIA H200"},
            trial("l4", S1, BF16, "vec", VEC16, 0.2),  # a synthetic device: no known peak
        ]
    )
    table = data.overview(rows).set_index("gpu")
    h200 = table.loc["h200"]
    assert h200["peak_gbps"] == 4800.0
    gbps = S1.bytes_moved(variants.get_dtype(BF16)) / 0.09e6
    assert h200["pct_of_peak"] == pytest.approx(100 * gbps / 4800)
    assert math.isnan(table.loc["l4", "pct_of_peak"]) and math.isnan(table.loc["l4", "peak_gbps"])
    assert data.bandwidth(rows, "h200")["pct_of_peak"].tolist() == [pytest.approx(h200["pct_of_peak"])]


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
