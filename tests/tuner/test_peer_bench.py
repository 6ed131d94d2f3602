"""The peers benchmark without a GPU: its command line, plan, time estimate, budget, rows and
tables (the frames here are made up by the tests; nothing is a measurement)."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from load_script import load_script

from tuner import peers as pb
from tuner.cli.presets import DEFAULT_SHAPES
from variants import DTYPES, Shape

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "bench_kernels.py"


@pytest.fixture(scope="module")
def script():
    return load_script("scripts/bench_kernels.py", "bench_kernels_under_test")


# --- command line -----------------------------------------------------------------------------


def test_defaults_cover_the_default_set_plus_three_small_shapes_in_every_dtype(script, monkeypatch) -> None:
    monkeypatch.delenv("OUT", raising=False)
    args = script.parse_args([])
    assert args.shapes == [*DEFAULT_SHAPES, *pb.SMALL_SHAPES]
    assert [d.name for d in args.dtypes] == list(DTYPES)
    assert args.groups == list(pb.PEER_GROUPS)
    assert args.max_autotune_formulations == ["sum_cat", "repeat_kv_bwd"]
    assert args.reps == 100 and args.out == script.RUNS / "peers.parquet"  # docs/runs
    for shape in pb.SMALL_SHAPES:  # 8-32 MB in every dtype
        for dtype in DTYPES.values():
            assert 8e6 <= shape.bytes_moved(dtype) <= 32e6, (shape, dtype.name)


def test_quick_is_two_shapes_in_bf16_and_explicit_choices_win(script) -> None:
    args = script.parse_args(["--quick"])
    assert args.shapes == list(pb.QUICK_SHAPES) and len(args.shapes) == 2
    assert [d.name for d in args.dtypes] == ["bf16"]
    args = script.parse_args(["--quick", "--dtype", "fp32", "--shape", "B=2,T=64,NH=4,NH_KV=2,HD=80"])
    assert args.shapes == [Shape(2, 64, 4, 2, 80)] and [d.name for d in args.dtypes] == ["fp32"]


def test_peer_groups_formulations_and_out(script, monkeypatch, tmp_path: Path) -> None:
    args = script.parse_args(["--peers", "triton,llmc", "--max-autotune", "none"])
    assert args.groups == ["llmc", "triton"] and args.max_autotune_formulations == []
    args = script.parse_args(["--max-autotune", "repeat_kv_bwd"])
    assert args.max_autotune_formulations == ["repeat_kv_bwd"]
    monkeypatch.setenv("OUT", str(tmp_path))
    assert script.parse_args([]).out == tmp_path / "peers.parquet"
    assert script.parse_args(["--out", "x.parquet"]).out == Path("x.parquet")
    assert script.make_plan(script.parse_args([])).head_to_head
    assert not script.make_plan(script.parse_args(["--no-head-to-head"])).head_to_head
    assert script.make_plan(script.parse_args([])).device_time
    assert not script.make_plan(script.parse_args(["--no-device-time"])).device_time


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--dtype", "fp8"], "unknown dtype 'fp8'"),
        (["--peers", "cublas"], "unknown peer group 'cublas'"),
        (["--max-autotune", "into_slices"], "unknown formulation 'into_slices'"),
        (["--shape", "B=8,T=1024"], "--shape"),
        (["--shape", "B=8,T=1024,NH=30,NH_KV=8,HD=128"], "divisible"),
        (["--reps", "0"], "--reps"),
        (["--budget-s", "-1"], "--budget-s"),
        (["--frobnicate"], "unrecognized arguments"),
    ],
)
def test_usage_errors_print_one_line_and_return_2(script, capsys, argv, words) -> None:
    assert script.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1


def test_estimate_prints_the_plan_without_a_gpu() -> None:
    """--estimate runs from the project root without installing the project, importing no
    cupy, torch or triton."""
    code = (
        "import runpy, sys; sys.argv = ['bench_kernels.py', '--estimate'];\n"
        "try:\n    runpy.run_path('scripts/bench_kernels.py', run_name='__main__')\n"
        "except SystemExit as e:\n    code = e.code\n"
        "print('heavy:', sorted(m for m in ('cupy', 'torch', 'triton') if m in sys.modules)); sys.exit(code)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "39 pairs" in out.stdout and "estimate:" in out.stdout and "max-autotune" in out.stdout
    assert "heavy: []" in out.stdout


def test_the_script_counts_the_triton_configs_it_runs(script) -> None:
    pytest.importorskip("triton")
    from tuner.runners.gpu import triton_peer

    assert len(triton_peer.TILE_CONFIGS) == script.TRITON_CONFIGS


def test_the_script_lists_the_formulations_the_peers_module_has(script) -> None:
    pytest.importorskip("torch")
    from tuner.runners.gpu import torch_peers

    assert script.EAGER_FORMULATIONS == torch_peers.EAGER
    assert script.COMPILED_FORMULATIONS == torch_peers.COMPILED
    assert script.MAX_AUTOTUNE_MODE in torch_peers.COMPILE_MODES


# --- plan, estimate, budget ---------------------------------------------------------------------


def plan(**changes) -> pb.Plan:
    values = {
        "shapes": list(pb.QUICK_SHAPES),
        "dtypes": [DTYPES["bf16"]],
        "groups": list(pb.PEER_GROUPS),
        "eager": ("sum_cat", "repeat_kv_bwd"),
        "compiled": ("sum_cat", "repeat_kv_bwd"),
        "max_autotune": ("sum_cat",),
        "triton_configs": 5,
    }
    values.update(changes)
    return pb.Plan(**values)


def test_peers_per_pair_follow_the_groups() -> None:
    peers = plan().peers_per_pair()
    assert peers[:3] == [pb.COPY_PEER, pb.EMPTY_PEER, pb.TUNED_PEER]
    assert [pb.llmc_peer(b) for b in (32, 64, 128, 256, 512, 1024)] == peers[3:9]
    assert pb.LLMC_SEED == "llm.c k1@128" and pb.TRITON_PEER in peers
    assert peers[-2:] == ["compile[default]:sum_cat", "compile[default]:repeat_kv_bwd"]
    assert plan().max_autotune_peers() == ["compile[max-autotune]:sum_cat"]
    only = plan(groups=["eager"])
    assert only.peers_per_pair() == [
        pb.COPY_PEER,
        pb.EMPTY_PEER,
        pb.TUNED_PEER,
        "eager:sum_cat",
        "eager:repeat_kv_bwd",
    ]
    assert only.max_autotune_peers() == []


def test_estimate_adds_its_parts_and_fits_max_autotune_into_the_budget() -> None:
    costs = pb.Costs()
    unlimited = pb.estimate(plan(budget_s=0), costs)
    assert unlimited.max_autotune_total == unlimited.max_autotune_fit == 2
    assert math.isclose(unlimited.total, sum(unlimited.parts.values()))
    assert unlimited.parts["compile default"] == 4 * costs.compile_default
    # one Triton layout per (dtype, HD, nrep): the two quick shapes differ in HD
    assert unlimited.parts["triton"] == pytest.approx(5 * (2 * costs.triton_compile + 2 * costs.triton_bench))
    without = unlimited.total - unlimited.parts["compile max-autotune"]
    tight = pb.estimate(plan(budget_s=without + costs.compile_max_autotune * 1.5), costs)
    assert tight.max_autotune_fit == 1
    none = pb.estimate(plan(budget_s=1.0), costs)
    assert none.max_autotune_fit == 0 and "compile max-autotune" not in none.parts
    text = pb.describe(plan(), pb.estimate(plan()))
    assert "2 pairs" in text and "estimate:" in text and "max-autotune" in text
    assert "head to head" in text and unlimited.parts["head to head"] > 2 * costs.compile_default
    assert unlimited.parts["device time"] == pytest.approx(2 * costs.device_time_pair)
    assert "device time" not in pb.estimate(plan(budget_s=0, device_time=False), costs).parts
    no_h2h = pb.estimate(plan(budget_s=0, head_to_head=False), costs)
    assert "head to head" not in no_h2h.parts and "head to head" not in pb.describe(
        plan(head_to_head=False), no_h2h
    )


def test_budget_follows_measured_costs() -> None:
    budget = pb.Budget(100.0, start=0.0, costs=pb.Costs(compile_default=2.0), reserve_s=10.0)
    assert budget.expected("compile default") == 2.0
    assert budget.allows("compile default", now=88.0)
    assert not budget.allows("compile default", now=88.5)
    budget.record("compile default", 20.0)
    budget.record("compile default", 30.0)
    assert budget.expected("compile default") == 25.0
    assert not budget.allows("compile default", now=70.0)
    budget.record("compile default", 2.0)  # the median: the first compile's start-up does not stick
    assert budget.expected("compile default") == 20.0
    assert pb.Budget(0.0, start=0.0).allows("compile max-autotune", now=1e9)


# --- rows and tables ----------------------------------------------------------------------------

SMALL = Shape(1, 512, 32, 8, 64)
BIG = Shape(8, 1024, 32, 8, 128)


def fake_rows() -> pd.DataFrame:
    """Two pairs: a small one where a torch.compile peer is fastest, a big one where Triton is;
    one peer failed, one skipped."""
    bf16 = DTYPES["bf16"]
    rows = []
    for shape, scale in ((SMALL, 1.0), (BIG, 10.0)):
        times = {
            pb.COPY_PEER: 0.010,
            pb.EMPTY_PEER: 0.002,
            pb.TUNED_PEER: 0.011,
            pb.llmc_peer(32): 0.080,
            pb.llmc_peer(128): 0.070,
            pb.llmc_peer(256): 0.060,
            pb.eager_peer("sum_cat"): 0.050,
            pb.compile_peer("default", "sum_cat"): 0.012 if shape is SMALL else 0.030,
            pb.TRITON_PEER: 0.020 if shape is SMALL else 0.0115,
        }
        kinds = {pb.COPY_PEER: pb.CEILING, pb.EMPTY_PEER: pb.LAUNCH, pb.TUNED_PEER: pb.TUNED}
        for peer, ms in times.items():
            kind = kinds.get(peer) or (
                pb.LLMC
                if peer.startswith("llm.c")
                else pb.EAGER
                if peer.startswith("eager")
                else pb.TRITON
                if peer == pb.TRITON_PEER
                else pb.COMPILED
            )
            extra = {"match": "exact" if shape is BIG else "nearest"} if peer == pb.TUNED_PEER else {}
            t = ms * scale if peer != pb.EMPTY_PEER else ms
            rows.append(
                pb.make_row(
                    shape, bf16, peer, kind, time_ms=t, p20_ms=t * 0.99, p80_ms=t * 1.01, reps=100, **extra
                )
            )
        rows.append(
            pb.make_row(
                shape,
                bf16,
                pb.eager_peer("into_slices"),
                pb.EAGER,
                status="wrong_result",
                message="3 of 9 wrong",
                time_ms=0.001,
            )
        )
        rows.append(
            pb.make_row(
                shape,
                bf16,
                pb.compile_peer("max-autotune-no-cudagraphs", "sum_cat"),
                pb.COMPILED,
                status="skipped",
            )
        )
    return pd.DataFrame(rows)


def test_rows_have_every_column_and_failed_rows_no_time() -> None:
    frame = fake_rows()
    assert set(pb.ROW_COLUMNS) - {"ratio_to_copy", "gbps", "frac_peak", "ratio_to_empty"} <= set(
        frame.columns
    )
    failed = frame[frame["status"] != "ok"]
    assert failed["time_ms"].isna().all() and (failed["reps"] == 0).all()
    assert frame.groupby(["shape", "dtype", "peer"]).size().max() == 1


def test_derive_ratios_bandwidth_and_peak() -> None:
    frame = pb.derive(fake_rows(), peak_gbps=4800.0)
    small = frame[frame["shape"] == SMALL.key].set_index("peer")
    mb = SMALL.bytes_moved(DTYPES["bf16"]) / 1e6
    assert small.loc[pb.TUNED_PEER, "ratio_to_copy"] == pytest.approx(1.1)
    assert small.loc[pb.TUNED_PEER, "gbps"] == pytest.approx(mb / 0.011)
    assert small.loc[pb.TUNED_PEER, "frac_peak"] == pytest.approx(mb / 0.011 / 4800)
    assert small.loc[pb.TUNED_PEER, "ratio_to_empty"] == pytest.approx(5.5)
    assert small.loc[pb.COPY_PEER, "ratio_to_copy"] == 1.0
    assert math.isnan(small.loc[pb.eager_peer("into_slices"), "ratio_to_copy"])
    assert pb.derive(fake_rows(), None)["frac_peak"].isna().all()


def test_summary_names_the_fastest_peer_and_llmc_blocks() -> None:
    table = pb.summary(pb.derive(fake_rows(), 4800.0)).set_index("shape")
    small, big = table.loc[SMALL.key], table.loc[BIG.key]
    assert small["fastest_peer"] == "compile[default]:sum_cat"
    assert small["fastest_peer_ms"] == pytest.approx(0.012)
    assert small["vs_fastest_peer"] == pytest.approx(0.012 / 0.011)
    assert big["fastest_peer"] == pb.TRITON_PEER  # the failed eager row (0.001 ms) never counts
    assert big["vs_fastest_peer"] == pytest.approx(0.115 / 0.110)
    assert small["vs_llmc_seed"] == pytest.approx(0.070 / 0.011)
    assert small["llmc_best_block"] == 256 and small["vs_llmc_best"] == pytest.approx(0.060 / 0.011)
    assert small["tuned_x_copy"] == pytest.approx(1.1) and small["copy_x_empty"] == pytest.approx(5.0)
    assert small["tuned_match"] == "nearest" and big["tuned_match"] == "exact"
    assert small["failed"] == "eager:into_slices (wrong_result)" and small["skipped"] == 1
    assert small["not_timed"] == 2
    assert list(table.index) == [SMALL.key, BIG.key]  # the rows' order


def test_summary_without_a_tuned_kernel_or_peers_is_nan_not_an_error() -> None:
    bf16 = DTYPES["bf16"]
    rows = [
        pb.make_row(SMALL, bf16, pb.COPY_PEER, pb.CEILING, time_ms=0.01, reps=100),
        pb.make_row(SMALL, bf16, pb.TUNED_PEER, pb.TUNED, status="missing", message="nothing"),
    ]
    table = pb.summary(pb.derive(pd.DataFrame(rows), None))
    assert math.isnan(table.loc[0, "tuned_ms"]) and table.loc[0, "fastest_peer"] == ""
    assert math.isnan(table.loc[0, "vs_fastest_peer"]) and table.loc[0, "llmc_best_block"] == 0
    assert "| 1,512,32,8,64 | bf16 (nearest) |" not in pb.render(table)


def test_render_draws_both_tables_last_the_comparison() -> None:
    text = pb.render(pb.summary(pb.derive(fake_rows(), 4800.0)))
    bandwidth, main = text.split("Tuned kernel against its peers")
    assert "| shape | dtype | MB | copy ms | copy GB/s |" in bandwidth
    lines = [line for line in main.splitlines() if line.startswith("|")]
    assert lines[0] == (
        "| shape | dtype | MB | tuned ms | x copy | fastest peer | peer ms | tuned vs peer | "
        "head to head | vs llm.c k1@128 | k1 best block | vs k1 best | not timed |"
    )
    assert lines[1].count("|") == lines[0].count("|")
    small = lines[2].split(" | ")
    assert small[0] == "| 1,512,32,8,64" and small[1] == "bf16 (nearest)"
    assert small[3:10] == ["0.0110", "1.100", "compile[default]:sum_cat", "0.0120", "1.09x", "", "6.36x"]
    assert lines[3].split(" | ")[5] == pb.TRITON_PEER
    assert lines[2].endswith(" | 2 |")
    assert "%" in bandwidth


def test_markdown_leaves_missing_values_blank() -> None:
    frame = pd.DataFrame([{"a": "x", "b": float("nan"), "c": 0.5, "d": 2.0}])
    text = pb.markdown(frame, {"a": ("A", ""), "b": ("B", ".2f"), "c": ("C", "%"), "d": ("D", "x")})
    assert text.splitlines()[-1] == "| x |  | 50.0% | 2.00x |"
