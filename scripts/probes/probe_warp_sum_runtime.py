"""Is warp_sum_runtime (the layout read at run time) as fast as warp_sum (the layout compiled
in)? For each MQA group of both backward ops where the bundled store holds `warp_sum` rows,
the fastest stored `warp_sum` configuration and the same parameters of `warp_sum_runtime` are
timed beside the same-run device copy, over interleaved rounds (the fastest median of each
kept), in one GPU process; every output is checked against the reference.

    python scripts/probes/probe_warp_sum_runtime.py --gpu h200 --out DIR   # DIR/warp_sum_runtime.parquet
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from results.store import bundled_results_dir, load_results, write_frame  # noqa: E402
from variants import Config, Shape, get_dtype, get_op  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from interleaved import fastest_interleaved  # noqa: E402

OPS = ("repkv_backward", "repkv_rope_backward")
KEYS = ["B", "T", "NH", "NH_KV", "HD", "dtype"]


def groups(frame: pd.DataFrame, gpu: str, op: str) -> list[tuple[Shape, str, dict[str, Any]]]:
    """(shape, dtype, parameters of the fastest stored warp_sum) of every MQA group of `op`."""
    rows = frame[(frame["gpu"] == gpu) & (frame["op"] == op) & (frame["family"] == "warp_sum")]
    rows = rows[(rows["status"] == "ok") & (rows["NH_KV"] == 1)]
    found = []
    for key, group in rows.groupby(KEYS):
        best = group.sort_values("ratio_to_copy").iloc[0]
        params = {"tail": 0, **json.loads(best["params"])}
        found.append((Shape(*map(int, key[:5])), key[5], params))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", default="h200", help="the store's GPU label to take the configurations from")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reps", type=int, default=60)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    from tuner.runners.gpu.session import DeviceSession

    frame = load_results(bundled_results_dir())[0]
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    for op_name in OPS:
        session = DeviceSession(families=get_op(op_name).families, reps=args.reps)
        print(f"{op_name} on {session.identity.name}", flush=True)
        for shape, dtype_name, params in groups(frame, args.gpu, op_name):
            dtype = get_dtype(dtype_name)
            configs = [Config.of(family, **params) for family in ("warp_sum", "warp_sum_runtime")]
            timed = {c.family: (session, c) for c in configs}
            best, copy = fastest_interleaved(shape, dtype, timed, args.rounds)
            print(
                f"{op_name} {shape} {dtype_name} {configs[0].key}: copy {copy * 1e3:.1f} us, "
                f"compiled {best['warp_sum'] / copy:.3f}x, run time {best['warp_sum_runtime'] / copy:.3f}x "
                f"({best['warp_sum_runtime'] / best['warp_sum']:.3f})",
                flush=True,
            )
            for family, t in best.items():
                rows.append(
                    {**shape.as_dict(), "op": op_name, "dtype": dtype_name, "family": family}
                    | {"params": json.dumps(params, sort_keys=True), "time_ms": t, "copy_ms": copy}
                    | {"ratio": t / copy, "gpu_name": session.identity.name}
                )
            write_frame(pd.DataFrame(rows), args.out / "warp_sum_runtime.parquet")
        session.release()
    print(f"{len(rows)} rows, {time.perf_counter() - started:.0f}s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
