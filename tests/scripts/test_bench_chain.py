"""scripts/bench_chain.py, the GQA chain benchmark, on the CPU: its plan and command line (no
cupy or torch imported), the PyTorch chains of its torch.compile peer against the ops' float64
references, the rows, targets and table from synthetic measurements, the configurations the
store serves it, and llm.c's RoPE source through NVRTC."""

from __future__ import annotations

import math
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "bench_chain.py"
sys.path.insert(0, str(ROOT / "scripts"))

import bench_chain  # noqa: E402
from bench_chain_parts.llmc import rope_expression, rope_grid, rope_reject, rope_source  # noqa: E402
from bench_chain_parts.plan import (  # noqa: E402
    BENCH_SHAPES,
    COMPILED,
    COPY,
    FUSED,
    LLMC_BEST,
    LLMC_SEED,
    PAIRS,
    SEED,
    SWEEP_BLOCKS,
    UNFUSED,
    Plan,
    case_counts,
    compile_peer,
    total_counts,
)

from variants import DTYPES, OPS, Shape, get_dtype  # noqa: E402
from variants.reference import decode, encode, op_inputs, validate_output  # noqa: E402
from variants.repkv_rope_backward import llmc_chain_tolerance  # noqa: E402
from variants.rope_repkv_forward.rope import freqs_cis  # noqa: E402


def run_script(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *argv], capture_output=True, text=True, timeout=120, cwd=ROOT
    )


# --- the plan and the command line, without cupy or torch ---
NO_GPU_IMPORTS = """
import sys
sys.path.insert(0, {scripts!r})
import bench_chain
codes = [bench_chain.main(argv) for argv in {argvs!r}]
heavy = sorted(m for m in ("cupy", "torch", "triton", "pandas") if m in sys.modules)
print("CODES", codes, "HEAVY", heavy)
"""


def test_estimate_and_usage_errors_import_neither_cupy_nor_torch() -> None:
    argvs = [
        ["--estimate"],
        ["--quick", "--estimate"],
        ["--shapes", "B=1,T=3,NH=4,NH_KV=2,HD=7", "--estimate"],
        ["--dtypes", "fp8", "--estimate"],
    ]
    code = NO_GPU_IMPORTS.format(scripts=str(ROOT / "scripts"), argvs=argvs)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "CODES [0, 0, 2, 2] HEAVY []" in done.stdout
    assert "HD=7" in done.stderr and "is odd" in done.stderr
    assert "unknown dtype 'fp8'" in done.stderr


def test_the_estimate_prints_the_plan_and_its_measurements() -> None:
    done = run_script("--estimate")
    assert done.returncode == 0, done.stderr
    plan = bench_chain.make_plan(bench_chain.parse_args([]))
    counts = total_counts(plan)
    assert f"= {len(plan.cases())} cases" in done.stdout
    assert f"{counts.timings} timings of 100 calls each" in done.stdout
    assert f"{counts.validations} validations" in done.stdout
    assert f"{counts.compiles} torch.compile compiles" in done.stdout
    assert len(plan.cases()) == 2 * len(BENCH_SHAPES) * 3 and counts.compiles == 2 * len(plan.cases())


def test_counts_follow_the_rules_of_the_gpu_half() -> None:
    plan = Plan(pairs=tuple(PAIRS.values()), shapes=(SEED,), dtypes=(get_dtype("bf16"),), rounds=3)
    blocks = len(SWEEP_BLOCKS)
    per_round = 2 + 4 + 2  # the copy's two methods, llm.c twice, unfused, fused, two compile modes
    seed = case_counts(plan, PAIRS["forward"], SEED)
    assert (seed.validations, seed.timings, seed.compiles) == (blocks + 3 + 2, 2 * blocks + 3 * per_round, 2)
    # at nrep 1 llm.c's repkv_forward is one cudaMemcpy: timed once, not at every block
    mha = Shape(B=1, T=8, NH=4, NH_KV=4, HD=8)
    assert case_counts(plan, PAIRS["forward"], mha).timings == 1 + blocks + 3 * per_round
    assert case_counts(plan, PAIRS["backward"], mha).timings == 2 * blocks + 3 * per_round
    none = Plan(pairs=(PAIRS["backward"],), shapes=(SEED,), dtypes=(get_dtype("fp32"),), modes=())
    assert case_counts(none, PAIRS["backward"], SEED).compiles == 0
    assert total_counts(plan).timings == 2 * seed.timings


def test_quick_and_explicit_selections() -> None:
    quick = bench_chain.parse_args(["--quick"])
    assert quick.shape_list == [SEED] and [d.name for d in quick.dtype_list] == ["bf16"]
    args = bench_chain.parse_args(
        [
            "--shapes",
            "B=1,T=4,NH=4,NH_KV=2,HD=8;B=2,T=4,NH=4,NH_KV=1,HD=8",
            "B=1,T=4,NH=4,NH_KV=2,HD=8",
            "--dtypes",
            "FP16,bf16",
            "--pairs",
            "backward",
            "--compile-modes",
            "none",
            "--out",
            "/tmp/x",
        ]
    )
    assert [s.key for s in args.shape_list] == ["B=1,T=4,NH=4,NH_KV=2,HD=8", "B=2,T=4,NH=4,NH_KV=1,HD=8"]
    assert [d.name for d in args.dtype_list] == ["fp16", "bf16"]
    assert [p.name for p in args.pair_list] == ["backward"] and args.modes == []
    assert args.out == Path("/tmp/x")


@pytest.mark.parametrize(
    "argv,words",
    [
        (["--shapes", "B=1,T=3,NH=4,HD=8"], "lacks NH_KV"),
        (["--shapes", "B=1,T=3,NH=6,NH_KV=4,HD=8"], "not divisible"),
        (["--shapes", "B=1,T=3,NH=4,NH_KV=2,HD=7"], "is odd"),
        (["--dtypes", "fp64"], "unknown dtype 'fp64'"),
        (["--pairs", "sideways"], "unknown pair 'sideways'"),
        (["--compile-modes", "reduce-overhead"], "unknown mode 'reduce-overhead'"),
        (["--reps", "0"], "--reps and --rounds"),
        (["--budget-s", "-1"], "--budget-s"),
        (["--frobnicate"], "unrecognized arguments"),
    ],
)
def test_usage_errors_exit_2_and_say_what_to_do(argv: list[str], words: str, capsys) -> None:
    assert bench_chain.main([*argv, "--estimate"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bench_chain.py: ") and words in err


# --- the PyTorch chains (the torch.compile peer) against the float64 references ---
SMALL_SHAPES = [
    Shape(B=2, T=5, NH=6, NH_KV=2, HD=6),  # nrep 3, odd T
    Shape(B=1, T=3, NH=4, NH_KV=4, HD=4),  # multi-head
    Shape(B=3, T=7, NH=5, NH_KV=1, HD=2),  # multi-query, odd NH
]


def torch_inputs(op, shape: Shape, torch_dtype):
    import torch

    x = np.random.default_rng(7).standard_normal(op.inputs[0].numel(shape))
    freqs = freqs_cis(shape, np).astype(np.float64).ravel()
    return [x, freqs], [torch.from_numpy(x).to(torch_dtype), torch.from_numpy(freqs).to(torch_dtype)]


@pytest.mark.parametrize("shape", SMALL_SHAPES, ids=str)
@pytest.mark.parametrize("fused", ["rope_repkv_forward", "repkv_rope_backward"])
def test_the_torch_chain_is_the_float64_reference(fused: str, shape: Shape) -> None:
    import torch
    from bench_chain_parts.torch_chain import CHAINS

    op = OPS[fused]
    arrays, tensors = torch_inputs(op, shape, torch.float64)
    dims = (shape.B, shape.T, shape.NH, shape.NH_KV, shape.HD)
    got = CHAINS[fused](*tensors, *dims)
    assert got.dtype == torch.float64 and got.numel() == op.output.numel(shape)
    positions = np.arange(shape.tokens) % shape.T
    expected = op.reference(arrays, shape, positions, np).ravel()
    np.testing.assert_allclose(got.numpy().ravel(), expected, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16"])
@pytest.mark.parametrize("fused", ["rope_repkv_forward", "repkv_rope_backward"])
def test_the_compiled_chain_traces_whole_and_passes_the_gpu_check(fused: str, dtype: str) -> None:
    """As the benchmark compiles it (dynamic=False, fullgraph=True; a CPU backend here), from
    the benchmark's storage arrays, checked as its GPU half checks it."""
    import torch
    from bench_chain_parts.torch_chain import CHAINS, TORCH_DTYPES

    op, d, shape = OPS[fused], get_dtype(dtype), Shape(B=2, T=5, NH=6, NH_KV=2, HD=8)
    stored = op_inputs(op, shape, d, np, seed=3)
    tensors = [torch.from_numpy(decode(s, d).astype(np.float32)).to(TORCH_DTYPES[dtype]) for s in stored]
    torch._dynamo.reset()
    compiled = torch.compile(CHAINS[fused], dynamic=False, fullgraph=True, backend="aot_eager")
    got = compiled(*tensors, shape.B, shape.T, shape.NH, shape.NH_KV, shape.HD)
    assert got.dtype == TORCH_DTYPES[dtype] and got.numel() == op.output.numel(shape)
    storage = encode(got.float().numpy().ravel(), d)
    check_op = op
    if op.name == "repkv_rope_backward":  # llm.c's order rounds each rotated replica first
        import dataclasses

        check_op = dataclasses.replace(op, tolerance=llmc_chain_tolerance)
    validation = validate_output(storage, stored, shape, d, np, op=check_op)
    assert validation.ok, validation.summary()


# --- rows, ratios, targets and the table ---
@dataclass(frozen=True)
class Timing:  # what the rows read of tuner's Timing
    median_ms: float
    p20_ms: float
    p80_ms: float
    reps: int


def timing(ms: float) -> Timing:
    return Timing(median_ms=ms, p20_ms=0.99 * ms, p80_ms=1.01 * ms, reps=100)


def synthetic_frame() -> pd.DataFrame:
    from bench_chain_parts.report import frame_of, make_row

    small = Shape(B=1, T=512, NH=32, NH_KV=8, HD=64)
    rows = []
    cases = [  # (pair, shape, dtype, copy, fused, llm.c k1@128, llm.c best, unfused, default, max-autotune)
        ("forward", SEED, "bf16", 0.080, 0.082, 0.700, 0.500, 0.150, 0.120, 0.110),  # every target met
        (
            "backward",
            SEED,
            "bf16",
            0.080,
            0.090,
            0.600,
            0.450,
            0.140,
            0.130,
            0.125,
        ),  # 0.64x unfused, 1.125x copy, 6.7x llm.c
        ("backward", SEED, "fp32", 0.150, 0.152, 0.900, 0.800, 0.300, 0.200, math.nan),  # max-autotune failed
        ("forward", small, "bf16", 0.006, 0.009, 0.030, 0.025, 0.016, 0.020, 0.019),  # under 32 MB
    ]
    for pair, shape, dtype, *times in cases:
        p, d = PAIRS[pair], get_dtype(dtype)
        peers = [
            (COPY, "ceiling"),
            (FUSED, "fused"),
            (LLMC_SEED, "llm.c"),
            (LLMC_BEST, "llm.c"),
            (UNFUSED, "unfused"),
            (compile_peer("default"), COMPILED),
            (compile_peer("max-autotune-no-cudagraphs"), COMPILED),
        ]
        for (peer, kind), ms in zip(peers, times, strict=True):
            if math.isnan(ms):
                rows.append(make_row(p, shape, d, peer, kind, status="compile_error", message="boom"))
            else:
                rows.append(make_row(p, shape, d, peer, kind, timing=timing(ms), config=f"cfg-{peer}"))
        rows.append(make_row(p, shape, d, "llm.c rope@256", "sweep", timing=timing(0.3)))
    for row in rows:
        row.update(run_id="20270101T000000-host-1", gpu_name="NVIDIA H200")
    return frame_of(rows)


def test_rows_carry_the_ratios_to_the_copy_and_the_fused_op() -> None:
    from bench_chain_parts.report import ROW_COLUMNS

    frame = synthetic_frame()
    assert list(frame.columns) == list(ROW_COLUMNS)
    fwd = frame[(frame["pair"] == "forward") & (frame["shape"] == SEED.key)].set_index("peer")
    assert fwd.loc[FUSED, "ratio_to_copy"] == pytest.approx(0.082 / 0.080)
    assert fwd.loc[LLMC_SEED, "ratio_to_fused"] == pytest.approx(0.700 / 0.082)
    assert fwd.loc[COPY, "ratio_to_copy"] == pytest.approx(1.0) and fwd.loc[FUSED, "ratio_to_fused"] == 1.0
    assert fwd.loc[FUSED, "MB"] == pytest.approx(
        OPS["rope_repkv_forward"].bytes_moved(SEED, DTYPES["bf16"]) / 1e6
    )
    assert fwd.loc[FUSED, "fused_op"] == "rope_repkv_forward" and fwd.loc[FUSED, "nrep"] == 4
    failed = frame[frame["status"] == "compile_error"].iloc[0]
    assert math.isnan(failed["time_ms"]) and math.isnan(failed["ratio_to_fused"]) and failed["reps"] == 0
    assert set(frame["run_id"]) == {"20270101T000000-host-1"} and set(frame["gpu_name"]) == {"NVIDIA H200"}


def test_summary_takes_the_fastest_compile_mode_and_judges_the_targets() -> None:
    from bench_chain_parts.report import summary

    lines = summary(synthetic_frame()).set_index(["pair", "shape", "dtype"])
    fwd = lines.loc[("forward", SEED.key, "bf16")]
    assert fwd["compile_mode"] == compile_peer("max-autotune-no-cudagraphs")
    assert fwd["compile_x_fused"] == pytest.approx(0.110 / 0.082)
    assert fwd["unfused_x_fused"] == pytest.approx(0.150 / 0.082)
    assert fwd["target_unfused"] == f"met {0.082 / 0.150:.2f}x"
    assert fwd["target_llmc"] == f"met {0.700 / 0.082:.2f}x"
    assert fwd["target_copy"] == f"met {0.082 / 0.080:.2f}x"
    bwd = lines.loc[("backward", SEED.key, "bf16")]
    assert bwd["target_unfused"] == f"UNMET {0.090 / 0.140:.2f}x"
    assert bwd["target_llmc"] == f"UNMET {0.600 / 0.090:.2f}x"
    assert bwd["target_copy"] == f"UNMET {0.090 / 0.080:.2f}x"
    fp32 = lines.loc[("backward", SEED.key, "fp32")]
    assert fp32["compile_mode"] == compile_peer("default")  # the other mode failed
    assert fp32["target_llmc"] == "n/a" and fp32["target_unfused"].startswith("met")
    small = lines.loc[("forward", "B=1,T=512,NH=32,NH_KV=8,HD=64", "bf16")]
    assert small["MB"] < 32 and small["target_copy"] == "n/a" and small["target_llmc"] == "n/a"
    assert small["target_unfused"] == f"met {0.009 / 0.016:.2f}x"


def test_a_missing_fused_time_is_not_measured_not_met() -> None:
    from bench_chain_parts.report import summary

    frame = synthetic_frame()
    frame.loc[frame["peer"] == FUSED, "status"] = "wrong_result"
    line = summary(frame).iloc[0]
    assert line["target_unfused"] == line["target_llmc"] == line["target_copy"] == "not measured"


def test_the_table_lists_every_case_the_targets_and_the_failures() -> None:
    from bench_chain_parts.report import render

    text = render(synthetic_frame())
    assert "run `20270101T000000-host-1` on NVIDIA H200" in text
    table = [
        line for line in text.splitlines() if line.startswith("| forward") or line.startswith("| backward")
    ]
    assert len(table) == 2 * 4  # the times, then the configurations
    assert "fused <= 0.6x best unfused (nrep 4)" in text and "fused >= 8x llm.c k1@128 (bf16, seed)" in text
    assert "| 8.54x |" in text  # llm.c k1@128 over the fused op, forward bf16 at the seed
    assert "Targets: 6 met, 3 unmet, 0 not measured." in text
    assert "backward B=8,T=1024,NH=32,NH_KV=8,HD=128 fp32 torch.compile[max-autotune-no-cudagraphs]: " in text
    assert "compile_error: boom" in text


def test_the_parquet_round_trips(tmp_path: Path) -> None:
    from results.writing import write_frame

    frame = synthetic_frame()
    write_frame(frame, tmp_path / "h200_chain.parquet")
    back = pd.read_parquet(tmp_path / "h200_chain.parquet")
    assert len(back) == len(frame) and back["ratio_to_fused"].equals(frame["ratio_to_fused"])


# --- what the store serves the benchmark ---
def test_the_store_serves_the_fused_and_repkv_ops_and_a_generic_config_elsewhere() -> None:
    from bench_chain_parts.choices import load_index, served

    index = load_index()
    bf16 = get_dtype("bf16")
    for pair in PAIRS.values():
        for op in (pair.fused, pair.repkv):
            config, how = served(index, "h200", op, SEED, bf16)
            assert how.startswith("exact") and config.family in OPS[op].families
    config, how = served(index, "no-such-gpu", "rope_repkv_forward", SEED, bf16)
    assert how.startswith("generic") and config.family == "vec" and config.values["block"] == 256


# --- llm.c's RoPE kernels ---
def test_rope_launch_covers_every_pair_and_refuses_what_llmc_cannot_index() -> None:
    for shape in (SEED, Shape(B=1, T=3, NH=5, NH_KV=1, HD=6)):
        for block in SWEEP_BLOCKS:
            assert rope_grid(shape, block) * block >= shape.tokens * 3 * shape.NH * shape.HD // 2
            assert rope_grid(shape, block) * block < shape.tokens * 3 * shape.NH * shape.HD // 2 + block
            assert rope_reject(shape, block) is None
    assert "odd" in rope_reject(Shape(B=1, T=3, NH=4, NH_KV=2, HD=7), 128)
    assert "2^31" in rope_reject(Shape(B=64, T=8192, NH=32, NH_KV=8, HD=128), 128)


def test_llmc_rope_source_compiles_with_nvrtc() -> None:
    nvrtc = pytest.importorskip("variants.nvrtc")
    try:
        nvrtc.nvrtc_version()
    except nvrtc.NvrtcUnavailable as exc:
        pytest.skip(str(exc))
    expressions = tuple(rope_expression(d, backward) for d in DTYPES.values() for backward in (False, True))
    program = nvrtc.Program("llmc_rope", rope_source(), ("-std=c++17",), expressions)
    reports = nvrtc.compile_program(program, "sm_90")
    assert [r.expression for r in reports] == list(expressions)
    for report in reports:
        assert report.ok, report.error
        assert not report.spills and report.registers > 0
    assert "ae6917f6f260d714de5715872385f7e1e976c4a3" in rope_source()
    assert "llmc/rope.cuh" in rope_source()


def test_the_run_is_named_after_the_gpu_the_time_and_the_process() -> None:
    from bench_chain_parts.plan import new_run_id

    assert new_run_id("h200", now=0.0, pid=42) == "chain-h200-19700101T000000-42"
    assert new_run_id("h200").startswith("chain-h200-")
