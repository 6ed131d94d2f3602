"""The dashboards' data on the overview and GPU pages: winners, ratios, family bests, bandwidth and peaks."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from dashboard_data_helpers import BF16, frame
from trial_rows import S1, S2, SPLIT16, VEC16, h100_rows, other_rows, trial

import variants
from service.dashboards import data


def test_overview_has_winner_ratio_and_speedup() -> None:
    table = data.overview(frame())
    row = table[(table["gpu"] == "h100") & (table["B"] == 8) & (table["dtype"] == BF16)].iloc[0]
    assert row["config_key"].startswith("split[") and row["trials"] == 5
    assert row["speedup_vs_baseline"] == pytest.approx(0.70 / 0.09)
    assert row["shape"] == "B=8 T=1024 NH=32 NH_KV=8 HD=128"
    assert len(table) == 6
    assert data.overview(frame().iloc[0:0]).empty


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


# Heat map, families, bandwidth ---------------------------------------------------------------


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
