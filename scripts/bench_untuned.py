"""Shapes nobody tuned: how close do the served and the raced configurations come to what a
40-trial tuning of the shape finds? On a GPU:

  1. for each shape and dtype, the configuration `GET /best` serves from the bundled store
     (`results.selection.select`) and the shortlist a first call races (`shortlist`);
  2. `python -m tuner` tunes every shape and dtype (TPE, 40 configurations, seed 0) into a
     scratch results directory;
  3. one GPU worker re-measures, in one process and interleaved over 3 rounds (fastest
     median of each), the served configuration, every shortlisted one, the tuned winner,
     the llm.c header's choice (`results.header`: its fallback where the layout is untuned),
     llm.c's kernel1 at block 128, and a device copy of the same bytes.

The raced configuration is the shortlist's fastest in step 3. With --refine, a fourth step
times, again over 3 interleaved rounds, the raced configuration, the tuned winner and every
valid configuration one parameter away from the raced one (`Family.neighbours`): how close one
step of local search after the race would come (columns `refined`, `refined_vs_tuned`, and
`refine_steps`, every step's ms).

Output: `untuned.parquet` (the table of time ratios to the tuned winner, also printed) and
`untuned_tuning.parquet` (the tuner's rows) in `--out` (default `docs/runs/`); the table of
docs/untuned.md comes from its H200 runs, `docs/runs/h200_untuned*.log` and `.parquet`.

    python scripts/bench_untuned.py --gpu h200 --out DIR

With --hold-out the shapes are ones the store holds, and each is planned (steps 1 and 3's
header) from the store without every row of its head layout (NH, NH_KV, HD; all dtypes and B*T):
the store as it would be had nobody tuned that layout. No tuning then: the reference is the
configuration the whole store serves for the shape (its tuned winner, 40 trials or more),
re-measured with the others. `--op` picks the op (default repkv_backward; `--layouts` names
preset layouts to hold out, each at the B*T the store holds for it).

SHAPES are in the bundled store since the H200 run docs/runs/h200_untuned.*: pass others (--shape).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "docs" / "runs"  # where the runs behind the shipped tables are kept
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # its parts, also when loaded from its path

from bench_untuned_parts.holdout import header_choice, stored_shapes, without_layout  # noqa: E402

import variants  # noqa: E402
from results import layout_rule  # noqa: E402
from results.best import winners  # noqa: E402
from results.header import export_table  # noqa: E402
from results.index import build_index  # noqa: E402
from results.selection import nearest_choices, select, shortlist  # noqa: E402
from results.store import bundled_results_dir, load_results  # noqa: E402
from tuner.runners.race import Timed, choose_winner  # noqa: E402
from tuner.runners.runner import Runner  # noqa: E402
from variants import Config, DType, Shape, get_dtype  # noqa: E402

# Real model layouts at batch/sequence sizes the store does not hold, and odd sizes.
SHAPES = [
    "B=2,T=512,NH=28,NH_KV=4,HD=128",  # Qwen2-7B
    "B=2,T=2048,NH=40,NH_KV=8,HD=128",  # Llama-2-13B-style GQA
    "B=1,T=4096,NH=32,NH_KV=8,HD=128",  # Llama-3-8B, one long sequence
    "B=6,T=1000,NH=32,NH_KV=8,HD=128",  # odd B*T
    "B=3,T=777,NH=14,NH_KV=2,HD=64",  # Qwen2-0.5B, odd sizes
    "B=8,T=1024,NH=12,NH_KV=4,HD=64",  # a small model
    "B=4,T=1024,NH=16,NH_KV=4,HD=80",  # HD 80
    "B=2,T=1536,NH=64,NH_KV=8,HD=128",  # Llama-2-70B-style
    "B=5,T=512,NH=24,NH_KV=8,HD=72",  # HD 72
    "B=1,T=3000,NH=20,NH_KV=4,HD=160",  # HD 160
]
DTYPES = ("fp32", "bf16")


def time_round(runner: Runner, shape: Shape, dtype: DType, configs: list[Config], times: dict) -> None:
    """One interleaved round: each configuration measured once, `times` keeping its fastest."""
    for config in configs:
        m = runner.measure(shape, dtype, config)
        if m.ok:
            times[config] = min(times.get(config, float("inf")), m.time_ms)


def refine_after_race(
    runner: Runner, op: variants.Op, shape: Shape, dtype: DType, raced: Config, tuned: Config
) -> dict[str, object]:
    """Step 4 (--refine): the raced configuration's one-parameter neighbours, timed with it and
    the tuned winner over 3 interleaved rounds; the raced one is kept unless a neighbour beats it
    by more than the race's margin (`tuner.runners.race.choose_winner`, as the op's race decides)."""
    steps = [raced, *op.family(raced.family).neighbours(shape, dtype, raced)]
    timed = list(dict.fromkeys([*steps, tuned]))
    runner.prepare([(shape, dtype, c) for c in timed])
    times: dict[Config, float] = {}
    for _ in range(3):
        time_round(runner, shape, dtype, timed, times)
    ranked = [Timed(c, position, (times[c],)) for position, c in enumerate(steps) if c in times]
    best = choose_winner(ranked).candidate if ranked else raced
    return {
        "refined": best.key,
        "refined_vs_tuned": times.get(best, float("nan")) / times.get(tuned, float("nan")),
        "refine_steps": json.dumps({c.key: times.get(c) for c in timed}),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", default="h200")
    parser.add_argument("--out", type=Path, default=RUNS, help="directory (default docs/runs)")
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--shape", action="append", help="B=..,T=..,NH=..,NH_KV=..,HD=.. (default: SHAPES)")
    parser.add_argument("--dtype", default=",".join(DTYPES), help="comma list (default fp32,bf16)")
    parser.add_argument("--op", default=variants.DEFAULT_OP, choices=list(variants.OPS))
    parser.add_argument("--hold-out", action="store_true", help="plan each stored shape without its layout")
    parser.add_argument("--layouts", help="with --hold-out: comma list of presets (tuner/cli/presets.py)")
    parser.add_argument(
        "--explore",
        type=int,
        default=0,
        help="also time the first N configurations the rule would serve, at most 3 of a tuned group "
        "and 4 of a family "
        "(column explored: every timed configuration's ms, to weigh other shortlists offline)",
    )
    parser.add_argument(
        "--refine",
        action="store_true",
        help="then time the raced configuration's one-parameter neighbours (columns refined*)",
    )
    args = parser.parse_args()
    dtypes = args.dtype.split(",")
    op = variants.get_op(args.op)
    args.out.mkdir(parents=True, exist_ok=True)
    stored = load_results(bundled_results_dir())[0]
    index = build_index(stored).for_op(op.name)
    if args.layouts:
        from tuner.cli.presets import get_model

        picked = [get_model(name) for name in args.layouts.split(",")]
        shapes = stored_shapes(index, args.gpu, [(m.NH, m.NH_KV, m.HD) for m in picked])
    else:
        shapes = [Shape.parse(s) for s in args.shape or SHAPES]
    # the llm.c header an export would write now (with --hold-out: from the store without the layout)
    header_table = None if args.hold_out else export_table(index, args.gpu)

    plans = {}
    extra: dict[tuple[Shape, str], list[Config]] = {}
    for shape in shapes:
        planned = index
        if args.hold_out:
            planned = build_index(without_layout(stored, op.name, shape)).for_op(op.name)
            header_table = export_table(planned, args.gpu)
        for name in dtypes:
            dtype = get_dtype(name)
            served = select(planned, args.gpu, shape, dtype)
            listed = shortlist(planned, args.gpu, shape, dtype)
            assert served is not None and listed, (shape, name)
            header = header_choice(header_table, shape, dtype, op.name)
            stored_best = select(index, args.gpu, shape, dtype) if args.hold_out else None
            explored = nearest_choices(
                planned.groups_of(args.gpu), shape, dtype, args.explore, 3, family_cap=4
            )
            plans[(shape, name)] = (
                served.candidate.config,
                [c.candidate.config for c in listed],
                header,
                stored_best.candidate.config if stored_best is not None else None,
            )
            # with --explore, also the class rule's first picks at the shape (the header's rule
            # asked at the shape itself rather than at its class's representative)
            classed = layout_rule.class_rank(planned.groups_of(args.gpu), shape, dtype)[:2]
            explored_configs = [c.candidate.config for c in explored] + [s.candidate.config for s in classed]
            extra[(shape, name)] = explored_configs if args.explore else []
        print(f"planned {shape.key}", flush=True)

    if not args.hold_out:
        scratch = Path(tempfile.mkdtemp(prefix="untuned-"))
        command = [sys.executable, "-m", "tuner", "tune", "--gpu", args.gpu, "--trials", str(args.trials)]
        command += ["--seed", "0", "--results", str(scratch), "--no-progress", "--dtype", ",".join(dtypes)]
        command += ["--op", op.name]
        for shape in shapes:
            command += ["--shape", shape.key]
        print(" ".join(command), flush=True)
        env = {**os.environ, "REPKV_RESULTS_DIR": str(scratch), "REPKV_BUNDLED": "false"}
        subprocess.run(command, check=True, cwd=ROOT, env=env)
        tuned_rows = load_results(scratch)[0]
        tuned_rows.to_parquet(args.out / "untuned_tuning.parquet", index=False)
        best = winners(tuned_rows)

    from tuner.runners.gpu.runner import GpuRunner

    runner = GpuRunner(families=op.families)
    kernel1 = op.baseline
    work = []
    for (shape, name), (served, listed, header, tuned) in plans.items():
        for config in dict.fromkeys([served, *listed, header, tuned, kernel1, *extra[(shape, name)]]):
            if config is not None:
                work.append((shape, get_dtype(name), config))
    runner.prepare(work)  # every kernel compiled at once, in parallel
    rows = []
    try:
        for (shape, name), (served, listed, header, tuned) in plans.items():
            dtype = get_dtype(name)
            if tuned is None:
                mask = (best["dtype"] == name) & pd.concat(
                    [best[k] == v for k, v in shape.as_dict().items()], axis=1
                ).all(axis=1)
                win = best[mask].iloc[0]
                tuned = Config(win["family"], tuple(sorted(json.loads(win["params"]).items())))
            explored = extra[(shape, name)]
            configs = [
                c
                for c in dict.fromkeys([served, *listed, tuned, header, kernel1, *explored])
                if c is not None
            ]
            times: dict[Config, float] = {}
            copy_ms = float("inf")
            for _ in range(3):
                time_round(runner, shape, dtype, configs, times)
                copy_ms = min(copy_ms, runner.copy_time(shape, dtype))
                runner._copy_ms.clear()  # a fresh copy timing each round, interleaved too
            raced = min(listed, key=lambda c: times.get(c, float("inf")))
            row = {
                **shape.as_dict(),
                "dtype": name,
                "MB": shape.bytes_moved(dtype) / 1e6,
                "served": served.key,
                "raced": raced.key,
                "tuned": tuned.key,
                "shortlist": len(listed),
                "served_ms": times.get(served),
                "raced_ms": times.get(raced),
                "tuned_ms": times.get(tuned),
                "header": header.key if header is not None else "copy",
                "header_ms": times.get(header) if header is not None else copy_ms,
                "kernel1_ms": times.get(kernel1),
                "op": op.name,
                "copy_ms": copy_ms,
                "listed": json.dumps([c.key for c in listed]),
                "explored": json.dumps({c.key: times.get(c) for c in dict.fromkeys([*listed, *explored])}),
            }
            if args.refine:
                row |= refine_after_race(runner, op, shape, dtype, raced, tuned)
            row["served_vs_tuned"] = row["served_ms"] / row["tuned_ms"]
            row["raced_vs_tuned"] = row["raced_ms"] / row["tuned_ms"]
            row["header_vs_tuned"] = row["header_ms"] / row["tuned_ms"]
            row["tuned_vs_copy"] = row["tuned_ms"] / copy_ms
            row["kernel1_vs_tuned"] = row["kernel1_ms"] / row["tuned_ms"]
            rows.append(row)
            # written after each group: a run cut short by its time limit keeps what it timed
            pd.DataFrame(rows).to_parquet(args.out / "untuned.parquet", index=False)
            refined = f", refined {row['refined_vs_tuned']:.3f}x" if args.refine else ""
            print(
                f"{shape.key} {name}: served {row['served_vs_tuned']:.3f}x, "
                f"raced {row['raced_vs_tuned']:.3f}x{refined}, header {row['header_vs_tuned']:.3f}x of the "
                f"40-trial winner ({row['tuned_ms']:.4f} ms, {row['tuned_vs_copy']:.3f}x the copy, "
                f"kernel1 {row['kernel1_vs_tuned']:.2f}x)",
                flush=True,
            )
    finally:
        runner.close()
    table = pd.DataFrame(rows)
    print(
        "| shape | dtype | MB | served / tuned | raced / tuned | header / tuned | tuned / copy "
        "| kernel1 / tuned | tuned ms |\n|---|---|---|---|---|---|---|---|---|"
    )
    for r in rows:
        print(
            f"| {r['B']},{r['T']},{r['NH']},{r['NH_KV']},{r['HD']} | {r['dtype']} | {r['MB']:.0f} | "
            f"{r['served_vs_tuned']:.3f} | {r['raced_vs_tuned']:.3f} | {r['header_vs_tuned']:.3f} | "
            f"{r['tuned_vs_copy']:.3f} | {r['kernel1_vs_tuned']:.2f} | {r['tuned_ms']:.4f} |"
        )
    within = (table["raced_vs_tuned"] <= 1.02).sum()
    print(f"raced within 2% of the 40-trial winner: {within} of {len(table)}")
    for column in ("raced_vs_tuned", "refined_vs_tuned")[: 1 + args.refine]:
        close = (table[column] <= 1.03).sum()
        print(f"{column}: within 3% on {close} of {len(table)}, worst {table[column].max():.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
