"""What one call costs inside a CUDA graph, where no CPU and no event stands between kernels:
the tuned kernel against the peers of the smallest shapes, where their event windows disagree.

For each shape and dtype, every side validated first against a float64 reference:

- `tuned`: the configuration served cold (REPKV_L2=cold) through
  `repkv_tune.ops.repkv_backward(out=...)`;
- `compile[default]:<f>`, `compile[max-autotune]:<f>`: `torch.compile` (dynamic=False) of the
  slice/sum/cat and repeat_kv formulations, the latter mode "max-autotune-no-cudagraphs";
- `triton:autotune`: the autotuned Triton kernel of tuner/runners/gpu/triton_peer.py;
- `copy`: `torch.Tensor.copy_` of half the bytes the kernel moves; `empty`: an empty Triton kernel.

The measures per side:

- `graph_cold`: a graph of N x (L2 flush, call) less a graph of N flushes, per call: the time
  the call adds to a stream that starts it from a cold L2, launch gaps included, no CPU (and
  the write-back of its output that the next flush forces);
- `graph_warm`: a graph of N calls, per call: dout and dinp still in L2 from the call before;
- `graph_fed`: a graph of N x (a kernel writing all of dout, call) less a graph of N such
  writes, per call: dout in L2 as the attention kernel before it in a training step leaves it,
  when the shape fits in L2;
- `held`: the peers benchmark's event window (flush, 150 us hold, events around one call),
  every window kept: its median and p80, the share of windows over 1.25x the median, the CPU's
  time to enqueue one call with its flush and events, and the GPU's time per call;
- `held_long`: the same with a longer hold (--long-hold-us, 1000 us), so that the CPU is far
  ahead of the GPU whatever a call costs it to issue.

`--graphs-only` skips the held measures. Where the results (`--results DIR`, read before the
bundled ones) hold configurations tuned with L2 fed (`python -m tuner --l2 fed`), `tuned:fed`
is what `GET /best?l2=fed` serves. `--configs N` adds, as sides `store#<rank>`, the N
fastest configurations the store holds for the group and each family's fastest there, launched
by CuPy on PyTorch's stream over the same dout and dinp (so `graph_fed` feeds them too): which
of them, if any, leads once dout is in L2; each with a cache hint also as `store#<rank>:plain`,
the same configuration with plain loads and stores.

    python scripts/bench_graph.py --out DIR [--shape B=1,T=512,NH=32,NH_KV=8,HD=64 ...] [--dtype bf16]

By default the peers benchmark's shapes under 40 MB in bf16, in fp32, bf16 and fp16.

Output: `graph.parquet` in `--out` (default `docs/runs/`) and the tables printed; the graph and
L2-fed tables of docs/peers.md and docs/l2-state.md come from its H200 runs,
`docs/runs/h200_graph_probe*.log` and `.parquet`.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "docs" / "runs"  # where the runs behind the shipped tables are kept
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # its parts, also when loaded from its path

from bench_graph_parts.arithmetic import ROUNDS  # noqa: E402
from bench_graph_parts.selection import small_shapes  # noqa: E402

from variants import Shape, get_dtype  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", action="append", help="repeatable (default: small_shapes())")
    parser.add_argument("--dtype", default="fp32,bf16,fp16")
    parser.add_argument("--gpu", default="h200")
    parser.add_argument("--reps", type=int, default=100, help="held windows per side")
    parser.add_argument("--long-hold-us", type=float, default=1000.0, help="the held_long measure's hold")
    parser.add_argument("--graphs-only", action="store_true", help="the graph measures alone")
    parser.add_argument(
        "--configs",
        type=int,
        default=0,
        help="the store's N fastest configurations and each family's fastest",
    )
    parser.add_argument(
        "--results",
        type=Path,
        help="a results directory read before the bundled one (default: the bundled one)",
    )
    parser.add_argument("--out", type=Path, default=RUNS, help="directory (default docs/runs)")
    args = parser.parse_args()
    try:  # bad input says so before any GPU work
        shapes = [Shape.parse(text) for text in args.shape] if args.shape else small_shapes()
        dtypes = [get_dtype(name) for name in args.dtype.split(",")]
    except ValueError as exc:
        parser.error(str(exc))
    os.environ["REPKV_L2"] = "cold"  # `tuned`, the op as served cold (read when it is imported, below)
    try:
        import cupy  # noqa: F401  (the GPU parts import it)
        import torch
    except ImportError as exc:
        parser.error(f"needs a GPU host with CuPy, PyTorch and Triton ({exc})")
    args.out.mkdir(parents=True, exist_ok=True)

    from bench_graph_parts.gpu import open_gpu
    from bench_graph_parts.graphs import graph_measures
    from bench_graph_parts.held import held_rounds
    from bench_graph_parts.rows import pair_rows
    from bench_graph_parts.sides import pair_sides

    gpu = open_gpu(args)
    rows: list[dict[str, Any]] = []
    for shape in shapes:
        for dtype in dtypes:
            pair = pair_sides(gpu, args, shape, dtype)
            measures, graphs = graph_measures(gpu.timer, pair.sides, pair.dout)
            held = held_rounds(pair.sides, gpu.held_flushes, args.reps, 0 if args.graphs_only else ROUNDS)
            for side, measure in held.items():
                measures[side] |= measure
            rows += pair_rows(shape, dtype, pair.configs, measures, torch.cuda.get_device_name(), args.gpu)
            pd.DataFrame(rows).to_parquet(args.out / "graph.parquet", index=False)
            del graphs
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
