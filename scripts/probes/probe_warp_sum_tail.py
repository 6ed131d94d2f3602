"""Does running the last copy blocks after every reduce block close `warp_sum`'s MQA gap to the
copy? The probe's kernels are `warp_sum`'s own templates with one more template argument, TAIL:
the last TAIL/8 of the copy blocks run after every reduce block (a reduce warp's loads are
LOADS/ITEMS round trips in a row, so one started last may hold the kernel open while the GPU
drains). TAIL 0 is `warp_sum` itself. For each MQA group of the bundled store where `warp_sum`
is tuned, its fastest stored configuration is timed at every TAIL, beside the same-run device
copy, over interleaved rounds (the fastest median of each kept), in one GPU process.

    python scripts/probes/probe_warp_sum_tail.py --gpu h200 --out DIR   # DIR/warp_sum_tail.parquet
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from results.store import bundled_results_dir, load_results, write_frame  # noqa: E402
from variants import Config, DType, Shape, get_dtype, get_op  # noqa: E402
from variants.family import Param  # noqa: E402
from variants.repkv_rope_backward.warp_sum import WarpSum as RopeWarpSum  # noqa: E402
from variants.warp_sum import WarpSum  # noqa: E402

TAILS = (0, 1, 2, 4)
OPS = ("repkv_backward", "repkv_rope_backward")
# warp_sum's block-role code (both ops' templates share it), and the same with TAIL
ROLE = """    // Copy blocks spread evenly over the grid, one division deciding the role (split.cu says why).
    const unsigned long long grid = gridDim.x, blk = blockIdx.x, q = (unsigned long long)q_blocks;
    unsigned long long before, rem;
    if (grid * q <= 0xFFFFFFFFull) {
        const unsigned product = unsigned(blk) * unsigned(q);
        before = product / unsigned(grid);
        rem = product - unsigned(before) * unsigned(grid);
    } else {
        before = blk * q / grid;
        rem = blk * q - before * grid;
    }
    const bool role_q = rem + q >= grid;
    const I index = role_q ? I(before) : I(blk - before);
"""
TAIL_ROLE = """    // Copy blocks spread evenly over the grid, one division deciding the role (split.cu says
    // why), but for the last TAIL/8 of them, which run after every reduce block: a reduce warp's loads
    // are LOADS/ITEMS round trips in a row, so a reduce block started last holds the kernel open
    // while the rest of the GPU drains. Blocks blk >= grid - tail copy, as copy block
    // (q - tail) + (blk - (grid - tail)); the others interleave q - tail copy blocks evenly.
    const unsigned long long tail = (unsigned long long)q_blocks * TAIL / 8;
    const unsigned long long grid = gridDim.x - tail, blk = blockIdx.x;
    const unsigned long long q = (unsigned long long)q_blocks - tail;
    unsigned long long before, rem = 0;
    if (blk >= grid) {
        before = q + (blk - grid);
    } else if (grid * q <= 0xFFFFFFFFull) {
        const unsigned product = unsigned(blk) * unsigned(q);
        before = product / unsigned(grid);
        rem = product - unsigned(before) * unsigned(grid);
    } else {
        before = blk * q / grid;
        rem = blk * q - before * grid;
    }
    const bool role_q = blk >= grid || rem + q >= grid;
    const I index = role_q ? I(before) : I(blk - before);
"""
SIGNATURE, TAIL_SIGNATURE = "int BLOCK, int LOAD", "int BLOCK, int TAIL, int LOAD"


def with_tail(source: str) -> str:
    """A warp_sum compilation unit with TAIL: its block-role code and template parameters
    replaced (a ValueError where the template no longer has them)."""
    if ROLE not in source or SIGNATURE not in source:
        raise ValueError("warp_sum's block-role code or template parameters changed: update the probe")
    return source.replace(ROLE, TAIL_ROLE).replace(SIGNATURE, TAIL_SIGNATURE)


class _Tail:
    """warp_sum with TAIL after BLOCK in its template arguments."""

    params = (*WarpSum.params, Param("tail", TAILS, "eighths of the copy blocks run last"))

    @property
    def source(self) -> str:
        return with_tail(super().source)

    def template_args(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> list[str]:
        args = super().template_args(shape, dtype, p)
        return [*args[:6], str(p["tail"]), *args[6:]]


class TailRepkv(_Tail, WarpSum):
    pass


class TailRope(_Tail, RopeWarpSum):
    pass


TAIL_FAMILIES = {"repkv_backward": TailRepkv(), "repkv_rope_backward": TailRope()}


def groups(frame: pd.DataFrame, gpu: str, op: str) -> list[tuple[Shape, str, Config]]:
    """(shape, dtype, fastest stored warp_sum config) of every MQA group of `op` on `gpu`."""
    rows = frame[(frame["gpu"] == gpu) & (frame["op"] == op) & (frame["family"] == "warp_sum")]
    rows = rows[(rows["status"] == "ok") & (rows["NH_KV"] == 1)]
    found = []
    keys = ["B", "T", "NH", "NH_KV", "HD", "dtype"]
    for key, group in rows.groupby(keys):
        best = group.sort_values("ratio_to_copy").iloc[0]
        params = {**json.loads(best["params"]), "tail": 0}
        shape = Shape(**dict(zip(keys[:5], map(int, key[:5]), strict=True)))
        found.append((shape, key[5], Config.of("warp_sum", **params)))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", default="h200")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reps", type=int, default=60)
    parser.add_argument("--op", default=",".join(OPS))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    from tuner.runners.gpu.session import DeviceSession

    frame = load_results(bundled_results_dir())[0]
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    for op_name in args.op.split(","):
        op = get_op(op_name)
        session = DeviceSession(families={**op.families, "warp_sum": TAIL_FAMILIES[op_name]}, reps=args.reps)
        print(f"{op_name} on {session.identity.name}", flush=True)
        for shape, dtype_name, best in groups(frame, args.gpu, op_name):
            dtype = get_dtype(dtype_name)
            configs = [Config.of("warp_sum", **{**best.values, "tail": t}) for t in TAILS]
            times: dict[str, list[float]] = {c.key: [] for c in configs}
            copies = []
            for _ in range(args.rounds):
                copies.append(session.copy_ms(shape, dtype, rounds=1))
                for config in configs:
                    m = session.measure(shape, dtype, config)
                    if not m.ok:
                        print(f"  {config.key}: {m.status} {m.message[:200]}", flush=True)
                        continue
                    times[config.key].append(m.time_ms)
            copy = min(copies)
            line = [f"{op_name} {shape} {dtype_name} copy {copy * 1e3:.1f} us"]
            for tail, config in zip(TAILS, configs, strict=True):
                t = min(times[config.key]) if times[config.key] else float("nan")
                line.append(f"tail{tail} {t / copy:.3f}")
                rows.append(
                    {**shape.as_dict(), "op": op_name, "dtype": dtype_name, "config_key": config.key}
                    | {"tail": tail, "time_ms": t, "copy_ms": copy, "ratio": t / copy}
                    | {"gpu_name": session.identity.name}
                )
            print("  ".join(line), flush=True)
            write_frame(pd.DataFrame(rows), args.out / "warp_sum_tail.parquet")
        session.release()
    print(f"{len(rows)} rows, {time.perf_counter() - started:.0f}s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
