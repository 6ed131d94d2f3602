"""Does the launch path change an event-timed window? One kernel, three ways in, beside a
`torch.compile` peer, timed as the peers benchmark times (L2 flushed, the hold, CUDA events
around one call) in interleaved rounds, and profiled for each kernel's own duration.

On the smallest shapes the peers benchmark has seen the compiled peers' event windows shorter
than the tuned kernel's by up to 0.6 us while the profiler gives both kernels the same
duration. The sides here:

- `cupy`: the served configuration launched by CuPy's RawKernel (the benchmark's `tuned` row);
- `op`: the same kernel through `repkv_tune.ops.repkv_backward(dout, NH_KV, out=...)`,
  what training code calls (cuLaunchKernel through CuPy's driver binding, on torch's stream);
- `compile`: `torch.compile` (default mode) of the slice/sum/cat formulation;
- `empty_cupy`, `empty_triton`: an empty kernel launched by CuPy and by Triton.

    python scripts/probes/probe_launch.py --shape B=1,T=512,NH=8,NH_KV=4,HD=256 --dtype fp32 --out DIR
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from results.schema import DEFAULT_HOLD_US  # noqa: E402
from variants import Shape, get_dtype  # noqa: E402

ROUNDS = 5
DEVICE_CALLS = 40


def rounds_of(
    sides: dict[str, Callable[[], Any]], flush: Callable[[], None], reps: int
) -> dict[str, list[float]]:
    """Each side's median per round, the sides in a different order each round."""
    from tuner.runners.gpu.timing import time_launches

    names = list(sides)
    out: dict[str, list[float]] = {n: [] for n in names}
    for r in range(ROUNDS):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            out[name].append(time_launches(sides[name], flush, reps=reps).median_ms)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", action="append", required=True)
    parser.add_argument("--dtype", default="bf16")
    parser.add_argument("--gpu", default="h200")
    parser.add_argument("--reps", type=int, default=100)
    parser.add_argument("--out", type=Path, default=Path("."))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    import torch

    from repkv_tune.ops import repkv_backward
    from results.index import build_index
    from results.selection import select
    from results.store import bundled_results_dir, load_results
    from tuner.runners.gpu import triton_peer
    from tuner.runners.gpu.kernel_profile import trace_calls
    from tuner.runners.gpu.peers import as_torch, share_stream_with_torch
    from tuner.runners.gpu.session import DeviceSession
    from tuner.runners.gpu.timing import empty_launch
    from tuner.runners.gpu.torch_peers import compile_formulation, configure_dynamo, sum_cat
    from tuner.runners.kernel_trace import device_times

    session = DeviceSession(reps=args.reps, hold_us=DEFAULT_HOLD_US)
    share_stream_with_torch(session.device.id)
    configure_dynamo()
    index = build_index(load_results(bundled_results_dir())[0])

    sink = torch.empty(1, device="cuda")
    rows = []
    for text in args.shape:
        shape = Shape.parse(text)
        for name in args.dtype.split(","):
            dtype = get_dtype(name)
            served = select(index, args.gpu, shape, dtype)
            cupy_launch = session.launcher(shape, dtype, served.candidate.config)
            dout_cp, dinp_cp = session.buffers(shape, dtype)
            assert session.run_checked(shape, dtype, cupy_launch).ok
            dout = as_torch(dout_cp, dtype).view(shape.B, shape.T, 3, shape.NH, shape.HD)
            dinp = as_torch(dinp_cp, dtype).view(shape.B, shape.T, shape.heads_in, shape.HD)
            compiled = compile_formulation(sum_cat, "default")
            compiled(dout, *shape.as_dict().values())
            repkv_backward(dout, shape.NH_KV, out=dinp)
            torch.cuda.synchronize()
            sides: dict[str, Callable[[], Any]] = {
                "cupy": cupy_launch,
                "op": lambda: repkv_backward(dout, shape.NH_KV, out=dinp),  # noqa: B023
                "compile": lambda: compiled(dout, *shape.as_dict().values()),  # noqa: B023
                "empty_cupy": empty_launch(),
                "empty_triton": lambda: triton_peer.empty_kernel[(1,)](sink),
            }
            timed = rounds_of(sides, session.flush, args.reps)
            profiled = sides
            device = device_times(
                trace_calls(profiled, session.flush, DEVICE_CALLS), list(profiled), DEVICE_CALLS
            )
            for side, medians in timed.items():
                rows.append(
                    {**shape.as_dict(), "shape": shape.key, "dtype": name, "side": side}
                    | {
                        "time_ms": statistics.median(medians),
                        "rounds": ", ".join(f"{m:.4f}" for m in medians),
                    }
                    | {"device_us": device[side].median_us if side in device else None}
                    | {"config": served.candidate.config.key}
                )
                print(
                    f"{shape.key} {name} {side:<13} {statistics.median(medians) * 1000:7.2f} us event"
                    f" {rows[-1]['device_us'] or float('nan'):7.2f} us device  rounds {rows[-1]['rounds']}",
                    flush=True,
                )
            session.release()
    pd.DataFrame(rows).to_parquet(args.out / "launch.parquet", index=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
