"""scripts/bench_chain.py on the CPU: its plan, counts and command line (no cupy or torch), its run ids."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import bench_chain  # noqa: E402
from bench_chain_parts.plan import (  # noqa: E402
    BENCH_SHAPES,
    PAIRS,
    SEED,
    SWEEP_BLOCKS,
    Plan,
    case_counts,
    total_counts,
)

from variants import OPS, Shape, get_dtype  # noqa: E402

SCRIPT = ROOT / "scripts" / "bench_chain.py"


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


# --- what the store serves the benchmark ---
def test_the_store_serves_the_fused_and_repkv_ops_as_the_op_would(tmp_path: Path) -> None:
    from bench_chain_parts.choices import load_index, served

    from results.index import build_index
    from results.store import load_results

    index = load_index()
    bf16 = get_dtype("bf16")
    for pair in PAIRS.values():
        for op in (pair.fused, pair.repkv):
            config, how = served(index, "h200", op, SEED, bf16)
            assert how.startswith("exact") and config.family in OPS[op].families
    # another GPU borrows the H200's tuning, as the op does (a generic `vec` was timed on an H100)
    config, how = served(index, "h100", "rope_repkv_forward", SEED, bf16, capability=90)
    assert config == served(index, "h200", "rope_repkv_forward", SEED, bf16)[0]
    assert how.endswith("on h200") and how.startswith("nearest")
    empty = build_index(load_results([tmp_path])[0])
    config, how = served(empty, "h100", "rope_repkv_forward", SEED, bf16)
    assert how.startswith("generic") and config.family == "vec" and config.values["block"] == 256


def test_a_family_this_gpu_cannot_run_is_not_borrowed(tmp_path: Path) -> None:
    from bench_chain_parts.choices import served
    from trial_rows import S1, trial

    from results.index import build_index
    from results.store import load_results, write_table

    bulk = {"block": 256, "blocks_per_sm": 0, "groups": 1, "l2": "none", "stages": 2}
    write_table([trial("h200", S1, "bf16", "bulk", bulk, 0.07)], tmp_path / "h200", "run")
    index = build_index(load_results([tmp_path])[0])
    bf16 = get_dtype("bf16")
    config, how = served(index, "h100", "repkv_backward", S1, bf16, capability=90)
    assert config.family == "bulk" and how == f"nearest, tuned at {S1.key} bf16 on h200"
    config, how = served(index, "a100", "repkv_backward", S1, bf16, capability=80)  # bulk needs sm_90
    assert how.startswith("generic") and config.family == "vec"


def test_the_run_is_named_after_the_gpu_the_time_and_the_process() -> None:
    from bench_chain_parts.plan import new_run_id

    assert new_run_id("h200", now=0.0, pid=42) == "chain-h200-19700101T000000-42"
    assert new_run_id("h200").startswith("chain-h200-")
