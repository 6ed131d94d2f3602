"""scripts/bench_graph.py: its arithmetic and its import without a GPU."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from bench_graph_parts.arithmetic import (  # noqa: E402
    held_measures,
    median_round,
    merged,
    per_call_us,
    relative,
    slow_share,
)
from bench_graph_parts.selection import leaders, plain_twin, small_shapes  # noqa: E402

from tuner.runners.timing_stats import Windows  # noqa: E402
from variants import Shape  # noqa: E402


def test_a_call_costs_what_it_adds_to_the_graph_over_the_flushes_alone() -> None:
    # 40 x (flush + call) took 2.0 ms against 1.8 ms for 40 flushes: 5 us a call
    assert per_call_us(2.0, 1.8, 40) == pytest.approx(5.0)
    assert per_call_us(0.2, 0.0, 40) == pytest.approx(5.0)


def test_slow_share_counts_windows_past_the_factor_of_the_median() -> None:
    windows = [6.0] * 7 + [17.0, 24.0, 6.1]
    assert slow_share(windows) == pytest.approx(0.2)
    assert slow_share([6.0] * 10) == 0.0


def test_one_odd_round_does_not_move_the_median_round() -> None:
    assert median_round([[6.0, 6.1, 6.0], [15.0, 16.0, 15.5], [6.2, 6.0, 6.1]]) == pytest.approx(6.1)


def test_ratios_are_to_the_tuned_side_in_every_measure() -> None:
    measures = {
        "tuned": {"graph_cold_us": 4.0, "graph_warm_us": 2.0, "held_us": 6.0, "held_long_us": 6.0},
        "peer": {"graph_cold_us": 5.0, "graph_warm_us": 1.0, "held_us": 6.6, "held_long_us": 5.4},
    }
    ratios = relative(measures)
    assert set(ratios["tuned"].values()) == {1.0}
    assert ratios["peer"] == pytest.approx(
        {"graph_cold_x_tuned": 1.25, "graph_warm_x_tuned": 0.5, "held_x_tuned": 1.1, "held_long_x_tuned": 0.9}
    )


def test_a_run_of_graphs_alone_has_ratios_for_its_graph_measures_only() -> None:
    measures = {
        "tuned": {"graph_cold_us": 4.0, "graph_warm_us": 2.0, "graph_fed_us": 3.0},
        "peer": {"graph_cold_us": 4.4, "graph_warm_us": 1.5, "graph_fed_us": 2.4},
    }
    assert relative(measures)["peer"] == pytest.approx(
        {"graph_cold_x_tuned": 1.1, "graph_warm_x_tuned": 0.75, "graph_fed_x_tuned": 0.8}
    )


def test_rounds_merge_into_one_set_of_windows_and_one_held_measure() -> None:
    runs = [
        Windows(np.array([0.006, 0.006, 0.017]), enqueue_us=150.0, gpu_us=200.0),
        Windows(np.array([0.006, 0.0061]), enqueue_us=250.0, gpu_us=210.0),
    ]
    one = merged(runs)
    assert list(one.ms) == [0.006, 0.006, 0.017, 0.006, 0.0061]
    assert (one.enqueue_us, one.gpu_us) == (200.0, 205.0) and one.cpu_ahead
    figures = held_measures("held", one)
    assert figures["held_us"] == pytest.approx(6.0)
    assert figures["held_slow_share"] == pytest.approx(0.2)
    assert (figures["held_enqueue_us"], figures["held_gpu_us_per_call"]) == (200.0, 205.0)
    assert not Windows(np.array([0.006]), enqueue_us=250.0, gpu_us=210.0).cpu_ahead


def test_the_default_shapes_are_the_benchmarks_under_40_mb() -> None:
    keys = {s.key for s in small_shapes()}
    assert keys == {
        "B=1,T=1024,NH=32,NH_KV=8,HD=128",
        "B=1,T=512,NH=32,NH_KV=8,HD=64",
        "B=1,T=512,NH=8,NH_KV=4,HD=256",
        "B=1,T=2048,NH=14,NH_KV=2,HD=64",
        "B=8,T=512,NH=14,NH_KV=2,HD=64",
    }


def test_the_store_leaders_are_its_fastest_then_each_familys_fastest_once() -> None:
    from results.index import build_index, shape_tuple
    from results.store import bundled_results_dir, load_results
    from variants import FAMILIES, get_dtype

    index = build_index(load_results(bundled_results_dir())[0])
    shape = Shape.parse("B=1,T=512,NH=32,NH_KV=8,HD=64")
    group = index.groups[("h200", shape_tuple(shape), get_dtype("bf16").name)]
    chosen = leaders(group, 3)
    ranks = [rank for rank, _ in chosen]
    first_of_family = {}
    for rank, candidate in enumerate(group.candidates):
        first_of_family.setdefault(candidate.family.name, rank)
    # this group holds every family but warp_sum and warp_sum_runtime (tuned at MQA layouts alone)
    assert set(first_of_family) == set(FAMILIES) - {"warp_sum", "warp_sum_runtime"}
    assert ranks == sorted({0, 1, 2} | set(first_of_family.values()))
    assert all(config == group.candidates[rank].config for rank, config in chosen)
    assert leaders(group, 0) == [] and leaders(None, 5) == []


def test_a_plain_twin_drops_the_cache_hints_and_nothing_else() -> None:
    from variants import Config

    hinted = Config.of("tile", block=128, vec_bytes=16, tokens=4, load="ldcs", store="stcs")
    plain = Config.of("tile", block=128, vec_bytes=16, tokens=4, load="plain", store="plain")
    assert plain_twin(hinted) == plain
    assert plain_twin(Config.of("tile", block=128, load="plain", store="plain")) is None
    assert plain_twin(Config.of("bulk", block=128, l2="evict_first")) is None  # no load or store hint


def test_the_script_explains_itself_without_a_gpu() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench_graph.py"), "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "CUDA graph" in result.stdout


@pytest.mark.parametrize(
    "argument,says",
    [
        (["--shape", "B=1,T=x"], "cannot read 'T=x'"),
        (["--dtype", "fp8"], "unknown dtype 'fp8'"),
    ],
)
def test_bad_input_is_one_line_before_any_gpu_work(tmp_path: Path, argument: list[str], says: str) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench_graph.py"), *argument, "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert says in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()
