"""The frontier ideas, measured: every valid configuration of the named families (default:
`bulk`, the Hopper bulk-copy family) on each shape and dtype, beside the device copy, an empty
launch and the bundled store's tuned winner, in one GPU process, every output validated first.

Per (shape, dtype) it prints the copy, the tuned winner's ratio to it, and for each idea the
fastest configuration that has it and its ratio: the bulk copy with one block per tile, the
bulk copy with persistent blocks, and the L2 evict-first policy on its loads. The winner is
timed again after the family's configurations, and the faster of its two times is kept, so
that drift in the GPU's state over the sweep does not favour the new family.

    python scripts/bench_frontier.py --gpu h200 --out DIR      # DIR/frontier.parquet

Output: `frontier.parquet` in `--out` (default `docs/runs/`) and the summary printed; the tables of
docs/kernels.md come from its H200 runs, `docs/runs/h200_frontier_*.txt` and `.parquet`.

With `--device-time N` the N fastest configurations by event time and the winner are then
profiled (`tuner.runners.gpu.kernel_profile`, needs PyTorch): each row profiled gets `device_us`, the
median GPU time of its kernel over 40 flushed calls without the launch, and the summary adds the
fastest of them by device time. Below ~30 MB, where the launch is a third of an event-timed
call, it tells apart configurations that the events rank within noise.

The parquet is rewritten after every shape and dtype, so a sweep stopped early (a time limit,
Ctrl-C) keeps every group it finished.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "docs" / "runs"  # where the runs behind the shipped tables are kept
sys.path.insert(0, str(ROOT))

from results.index import build_index  # noqa: E402
from results.schema import DEFAULT_HOLD_US, Status  # noqa: E402
from results.selection import select  # noqa: E402
from results.store import bundled_results_dir, load_results, write_frame  # noqa: E402
from variants import FAMILIES, Shape, get_dtype  # noqa: E402

SHAPES = [
    "B=8,T=1024,NH=32,NH_KV=8,HD=128",  # 604 MB in fp32
    "B=16,T=2048,NH=32,NH_KV=8,HD=128",  # 2.4 GB
    "B=4,T=2048,NH=64,NH_KV=8,HD=128",  # 1.1 GB, nrep 8
    "B=8,T=2048,NH=32,NH_KV=8,HD=64",  # 604 MB, HD 64
    "B=4,T=1024,NH=24,NH_KV=8,HD=128",  # 235 MB
    "B=1,T=1024,NH=32,NH_KV=8,HD=128",  # 75 MB
]
IDEAS: dict[str, Callable[[Mapping[str, Any]], bool]] = {
    "bulk, a block per tile": lambda v: v["blocks_per_sm"] == 0 and v["l2"] == "none",
    "bulk, persistent": lambda v: v["blocks_per_sm"] > 0 and v["l2"] == "none",
    "bulk + L2 evict_first": lambda v: v["l2"] == "evict_first",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", default="h200", help="the store's label of this GPU (default h200)")
    parser.add_argument("--out", type=Path, default=RUNS, help="directory (default docs/runs)")
    parser.add_argument("--shape", action="append", help="B=..,T=..,NH=..,NH_KV=..,HD=.. (default: SHAPES)")
    parser.add_argument("--dtype", default="fp32,bf16,fp16")
    parser.add_argument("--family", default="bulk", help="comma list of families to sweep, or all")
    parser.add_argument(
        "--hold-us",
        type=float,
        default=DEFAULT_HOLD_US,
        help="GPU-side wait after each L2 flush, as the tuner and bench_kernels.py (default %(default)g)",
    )
    parser.add_argument("--reps", type=int, default=100)
    parser.add_argument(
        "--device-time",
        type=int,
        default=0,
        metavar="N",
        help="profile the N fastest configurations and the winner for their device time (default 0: none)",
    )
    parser.add_argument("--render", type=Path, help="print the summary of a frontier.parquet and exit")
    args = parser.parse_args()
    if args.render:
        print(render(pd.read_parquet(args.render)))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)

    from tuner.runners.gpu.runner import GpuRunner  # a worker process: a hang or crash costs one trial

    index = build_index(load_results(bundled_results_dir())[0])
    names = list(FAMILIES) if args.family == "all" else args.family.split(",")
    families = [FAMILIES[name] for name in names]
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    with GpuRunner(reps=args.reps, hold_us=args.hold_us) as runner:
        identity = runner.identity
        print(f"{identity.name}, {identity.sm_count} SMs, driver {identity.driver_version}", flush=True)
        for text in args.shape or SHAPES:
            shape = Shape.parse(text)
            for name in args.dtype.split(","):
                dtype = get_dtype(name)
                configs = [c for family in families for c in family.valid_configs(shape, dtype)]
                served = select(index, args.gpu, shape, dtype)
                tuned = [served.candidate.config] if served is not None else []
                runner.prepare([(shape, dtype, c) for c in tuned + configs])
                copy_ms = runner.copy_time(shape, dtype)
                base = {**shape.as_dict(), "dtype": name, "MB": shape.bytes_moved(dtype) / 1e6}
                base |= {"gpu": args.gpu, "copy_ms": copy_ms, "hold_us": args.hold_us}
                group = []
                for role, config in (
                    [("tuned", c) for c in tuned]
                    + [("candidate", c) for c in configs]
                    + [("tuned", c) for c in tuned]
                ):
                    m = runner.measure(shape, dtype, config)
                    group.append(
                        base
                        | {"role": role, "family": config.family, "config_key": config.key}
                        | {f"p_{k}": v for k, v in config.values.items() if k in ("blocks_per_sm", "l2")}
                        | {"status": str(m.status), "time_ms": m.time_ms if m.ok else None}
                        | {"message": m.message[:300]}
                    )
                if args.device_time:
                    configs = {c.key: c for c in tuned + configs}
                    group = with_device_time(group, configs, args.device_time, shape, dtype, args.hold_us)
                rows.extend(group)
                write_frame(pd.DataFrame(rows), args.out / "frontier.parquet")
                print(summarize(pd.DataFrame(group), copy_ms), flush=True)
                print(f"  [{time.perf_counter() - started:.0f}s]", flush=True)
    print(f"{len(rows)} rows in {args.out / 'frontier.parquet'}")
    return 0


DEVICE_CALLS = 40
_PROFILER: Any = None


def profiled_keys(group: list[dict[str, Any]], top: int) -> list[str]:
    """The configurations a group's device-time pass profiles: the winner, then the `top`
    fastest ok candidates by event time."""
    ok = [r for r in group if r["time_ms"] is not None]
    fastest = sorted((r for r in ok if r["role"] == "candidate"), key=lambda r: r["time_ms"])[:top]
    keys = [r["config_key"] for r in ok if r["role"] == "tuned"] + [r["config_key"] for r in fastest]
    return list(dict.fromkeys(keys))


def with_device_time(
    group: list[dict[str, Any]],
    configs: Mapping[str, Any],
    top: int,
    shape: Shape,
    dtype: Any,
    hold_us: float,
) -> list[dict[str, Any]]:
    """The group's rows, those of `profiled_keys` with `device_us` (`configs`: key -> Config)."""
    global _PROFILER
    from tuner.runners.gpu.kernel_profile import trace_calls
    from tuner.runners.gpu.session import DeviceSession
    from tuner.runners.kernel_trace import device_times

    if _PROFILER is None:
        from tuner.runners.gpu.peers import share_stream_with_torch

        _PROFILER = DeviceSession(reps=10, hold_us=hold_us)
        share_stream_with_torch(_PROFILER.device.id)
    keys = profiled_keys(group, top)
    sides = {k: _PROFILER.launcher(shape, dtype, configs[k]) for k in keys}
    times = device_times(trace_calls(sides, _PROFILER.flush, DEVICE_CALLS), keys, DEVICE_CALLS)
    _PROFILER.release()
    return [
        r | ({"device_us": times[r["config_key"]].median_us} if r["config_key"] in times else {})
        for r in group
    ]


def summarize(group: pd.DataFrame, copy_ms: float) -> str:
    first = group.iloc[0]
    shape = Shape(*(int(first[k]) for k in ("B", "T", "NH", "NH_KV", "HD")))
    lines = [f"{shape.key} {first['dtype']} ({first['MB']:.0f} MB): copy {copy_ms:.4f} ms"]
    ok = group[group["status"] == str(Status.OK)]
    failed = group[group["status"] != str(Status.OK)]
    if len(failed):
        one = failed.iloc[0]
        lines.append(
            f"  {len(failed)} failed, e.g. {one['config_key']}: {one['status']} {one['message'][:200]}"
        )
    tuned = ok[ok["role"] == "tuned"]
    if len(tuned):
        lines.append(line("tuned winner", tuned.loc[tuned["time_ms"].idxmin()], copy_ms))
    for family, rows in ok[ok["role"] == "candidate"].groupby("family", sort=False):
        lines.append(line(f"best {family}", rows.loc[rows["time_ms"].idxmin()], copy_ms))
    if "device_us" in ok and ok["device_us"].notna().any():
        profiled = ok[ok["device_us"].notna()]
        for label, rows in (("winner", profiled[profiled["role"] == "tuned"]), ("fastest", profiled)):
            if len(rows):
                best = rows.loc[rows["device_us"].idxmin()]
                lines.append(
                    f"  {label + ' by device time':<24} {best['device_us']:.2f} us  {best['config_key']}"
                )
    candidates = ok[(ok["role"] == "candidate") & ok["family"].eq("bulk")]
    if candidates.empty:
        return "\n".join(lines)
    values = candidates[["p_blocks_per_sm", "p_l2"]].rename(columns=lambda c: c[2:]).to_dict("records")
    for idea, has in IDEAS.items():
        chosen = candidates[[has(v) for v in values]]
        if not chosen.empty:
            lines.append(line(idea, chosen.loc[chosen["time_ms"].idxmin()], copy_ms))
    return "\n".join(lines)


def line(label: str, row: pd.Series, copy_ms: float) -> str:
    return f"  {label:<24} {row['time_ms'] / copy_ms:.3f}x copy  {row['time_ms']:.4f} ms  {row['config_key']}"


def render(frame: pd.DataFrame) -> str:
    """The per-idea summary of every (shape, dtype) of a frontier.parquet."""
    keys = ["B", "T", "NH", "NH_KV", "HD", "dtype"]
    groups = frame.groupby(keys, sort=False)
    return "\n".join(summarize(group, float(group["copy_ms"].iloc[0])) for _, group in groups)


if __name__ == "__main__":
    raise SystemExit(main())
