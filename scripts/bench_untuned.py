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

The raced configuration is the shortlist's fastest in step 3.

Output: `untuned.parquet` (the table of time ratios to the tuned winner, also printed) and
`untuned_tuning.parquet` (the tuner's rows) in `--out` (default `docs/runs/`); the table of
docs/untuned.md comes from its H200 runs, `docs/runs/h200_untuned*.log` and `.parquet`.

    python scripts/bench_untuned.py --gpu h200 --out DIR

The H200 run of 2026-11-30 (docs/runs/h200_untuned.*) added its 40-trial tunings
to the bundled store (results/data/h200/20261130T122045-vm-1901.parquet), so these shapes
are tuned now: pass other shapes (--shape) to repeat the experiment.
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

from results.best import winners  # noqa: E402
from results.header import export_table, plan  # noqa: E402
from results.index import build_index  # noqa: E402
from results.selection import select, shortlist  # noqa: E402
from results.store import bundled_results_dir, load_results  # noqa: E402
from variants import Config, Shape, get_dtype  # noqa: E402

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
KERNEL1 = Config.of("naive", block=128)  # llm.c's kernel1 at its block size


def header_choice(table, shape: Shape, dtype) -> Config:
    """What the exported header (`results.header.plan`) launches for the shape: its row's
    configuration, or for a layout without rows the layout rule's generic kernel."""
    chosen = plan(table, dtype.name, shape)
    if chosen.row >= 0:
        row = table.rows[chosen.row]
        return next(c for c in index_configs(row.family) if c.key == row.config_key)
    return table.fallback.kernels[dtype.name][-1 - chosen.kernel].config


def index_configs(family: str):
    from variants import get_family

    return get_family(family).space()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", default="h200")
    parser.add_argument("--out", type=Path, default=RUNS, help="directory (default docs/runs)")
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--shape", action="append", help="B=..,T=..,NH=..,NH_KV=..,HD=.. (default: SHAPES)")
    parser.add_argument("--dtype", default=",".join(DTYPES), help="comma list (default fp32,bf16)")
    args = parser.parse_args()
    dtypes = args.dtype.split(",")
    args.out.mkdir(parents=True, exist_ok=True)
    shapes = [Shape.parse(s) for s in args.shape or SHAPES]
    index = build_index(load_results(bundled_results_dir())[0])
    header_table = export_table(index, args.gpu)  # the llm.c header an export would write now

    plans = {}
    for shape in shapes:
        for name in dtypes:
            dtype = get_dtype(name)
            served = select(index, args.gpu, shape, dtype)
            listed = shortlist(index, args.gpu, shape, dtype)
            assert served is not None and listed, (shape, name)
            header = header_choice(header_table, shape, dtype)
            plans[(shape, name)] = (served.candidate.config, [c.candidate.config for c in listed], header)

    scratch = Path(tempfile.mkdtemp(prefix="untuned-"))
    command = [sys.executable, "-m", "tuner", "tune", "--gpu", args.gpu, "--trials", str(args.trials)]
    command += ["--seed", "0", "--results", str(scratch), "--no-progress", "--dtype", ",".join(dtypes)]
    for shape in shapes:
        command += ["--shape", shape.key]
    print(" ".join(command), flush=True)
    env = {**os.environ, "REPKV_RESULTS_DIR": str(scratch), "REPKV_BUNDLED": "false"}
    subprocess.run(command, check=True, cwd=ROOT, env=env)
    tuned_rows = load_results(scratch)[0]
    tuned_rows.to_parquet(args.out / "untuned_tuning.parquet", index=False)
    best = winners(tuned_rows)

    from tuner.runners.gpu.runner import GpuRunner

    runner = GpuRunner()
    rows = []
    try:
        for (shape, name), (served, listed, header) in plans.items():
            dtype = get_dtype(name)
            mask = (best["dtype"] == name) & pd.concat(
                [best[k] == v for k, v in shape.as_dict().items()], axis=1
            ).all(axis=1)
            win = best[mask].iloc[0]
            tuned = Config(win["family"], tuple(sorted(json.loads(win["params"]).items())))
            configs = list(dict.fromkeys([served, *listed, tuned, header, KERNEL1]))
            times: dict[Config, float] = {}
            copy_ms = float("inf")
            for _ in range(3):
                for config in configs:
                    m = runner.measure(shape, dtype, config)
                    if m.ok:
                        times[config] = min(times.get(config, float("inf")), m.time_ms)
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
                "header": header.key,
                "header_ms": times.get(header),
                "kernel1_ms": times.get(KERNEL1),
                "copy_ms": copy_ms,
            }
            row["served_vs_tuned"] = row["served_ms"] / row["tuned_ms"]
            row["raced_vs_tuned"] = row["raced_ms"] / row["tuned_ms"]
            row["header_vs_tuned"] = row["header_ms"] / row["tuned_ms"]
            row["tuned_vs_copy"] = row["tuned_ms"] / copy_ms
            row["kernel1_vs_tuned"] = row["kernel1_ms"] / row["tuned_ms"]
            rows.append(row)
            print(
                f"{shape.key} {name}: served {row['served_vs_tuned']:.3f}x, "
                f"raced {row['raced_vs_tuned']:.3f}x, header {row['header_vs_tuned']:.3f}x of the "
                f"40-trial winner ({row['tuned_ms']:.4f} ms, {row['tuned_vs_copy']:.3f}x the copy, "
                f"kernel1 {row['kernel1_vs_tuned']:.2f}x)",
                flush=True,
            )
    finally:
        runner.close()
    table = pd.DataFrame(rows)
    table.to_parquet(args.out / "untuned.parquet", index=False)
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
