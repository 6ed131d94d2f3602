"""Benchmark on the GPU: the tuned winners against their peers, timed in the same process.

For every shape and dtype: the device copy of the same bytes (the practical ceiling),
llm.c's kernel1 at block 128, PyTorch eager and torch.compile, and the best configuration
recorded in the results store for this GPU. Every kernel's output is validated before it is
timed. Prints a markdown table and writes the rows to parquet.

    python scripts/bench_kernels.py --gpu h200 --results results/data --out bench.parquet
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from results.best import winners  # noqa: E402
from results.schema import SHAPE_COLUMNS  # noqa: E402
from results.store import load_results  # noqa: E402
from variants import BASELINE, Config, Shape, get_dtype  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", required=True, help="label of the GPU's results, e.g. h200")
    parser.add_argument("--results", type=Path, default=ROOT / "results" / "data")
    parser.add_argument("--shape", action="append", type=Shape.parse, help="default: every tuned shape")
    parser.add_argument("--dtype", default="fp32,bf16,fp16")
    parser.add_argument("--reps", type=int, default=100)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)

    import cupy as cp

    from tuner.gpu.peers import as_storage, torch_peers
    from tuner.gpu.session import DeviceSession
    from tuner.gpu.timing import time_launches
    from variants.reference import validate_output

    frame, _ = load_results(args.results)
    best = winners(frame[frame["gpu"] == args.gpu]) if not frame.empty else frame
    dtypes = [get_dtype(d) for d in args.dtype.split(",")]
    # (shape, dtype) -> the winning configuration recorded for this GPU
    tuned = {
        (Shape(*(int(r[k]) for k in SHAPE_COLUMNS)), r["dtype"]): Config(
            r["family"], tuple(sorted(json.loads(r["params"]).items()))
        )
        for _, r in best.iterrows()
    }
    shapes = args.shape or sorted({shape for shape, _ in tuned})
    session = DeviceSession(reps=args.reps)
    rows = []
    for shape in shapes:
        for dtype in dtypes:
            copy_ms = session.copy_ms(shape, dtype)
            row = {
                "shape": shape.key,
                "dtype": dtype.name,
                "MB": shape.bytes_moved(dtype) / 1e6,
                "copy_ms": copy_ms,
            }
            kernels = {"llm.c": BASELINE}
            if (shape, dtype.name) in tuned:
                kernels["tuned"] = tuned[(shape, dtype.name)]
                row["tuned_config"] = kernels["tuned"].key
            for name, config in kernels.items():
                result = session.measure(shape, dtype, config)
                row[f"{name}_ms"] = result.time_ms if result.ok else float("nan")
                if not result.ok:
                    print(f"{shape} {dtype.name} {name}: {result.status}: {result.message[:200]}")
            dout, _ = session.buffers(shape, dtype)
            for name, call in torch_peers(shape, dtype, dout).items():
                check = validate_output(as_storage(call(), dtype), dout, shape, dtype, cp)
                if not check.ok:
                    print(f"{shape} {dtype.name} {name}: wrong result: {check.summary()}")
                    row[f"{name}_ms"] = float("nan")
                    continue
                row[f"{name}_ms"] = time_launches(call, session.flush, reps=args.reps).median_ms
            rows.append(row)
            print(json.dumps(row), flush=True)
    table = pd.DataFrame(rows)
    for peer in ("llm.c", "torch_eager", "torch_compile"):
        if "tuned_ms" in table:
            table[f"x_{peer}"] = table[f"{peer}_ms"] / table["tuned_ms"]
    if "tuned_ms" in table:
        table["x_copy"] = table["tuned_ms"] / table["copy_ms"]
    table.insert(0, "gpu", session.identity.name)
    if args.out:
        table.to_parquet(args.out)
    print(table.drop(columns=["tuned_config"], errors="ignore").to_markdown(index=False, floatfmt=".4g"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
