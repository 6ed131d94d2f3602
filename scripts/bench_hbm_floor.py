"""The HBM's floor for a kernel's traffic: how close to the copy can any kernel get?

repkv backward reads dout (3*NH heads a token) and writes dinp (NH + 2*NH_KV heads): more is read
than written, so it may beat a copy of half its bytes, which reads and writes as many. By how
much depends on the memory, not on the kernel. `--op NAME` measures another op of variants.OPS:
its inputs read (freqs_cis too) and its output written; the forward ops write more than they
read. On each shape and dtype this times, in one process and as the tuner times (L2 flushed
before every call, the hold after it; median of `--reps`), plus the profiler's device time of each:

- `memcpy`: cudaMemcpyAsync of half the bytes (the copy the ratios are to), and `copy`: the
  same bytes copied by a 16-byte kernel;
- `read`: a kernel that only reads the op's input bytes; `write`: one that only writes its
  output's; `read+write` is their sum, the time if reads and writes cost what they cost alone;
- `twin`: one kernel that reads the input bytes and writes the output's, both streams
  contiguous and interleaved at the op's ratio, with no gather and no sum: this traffic at its
  simplest;
- `tuned`: the configuration the selection serves from the bundled store.

The table gives each over the memcpy, and the tuned kernel over the twin and over the faster
of the two copies (the copy the tuner holds kernels to since `copy_method` "fastest").

Each streaming kernel is the fastest of 16-byte words at 256 or 512 threads and 1, 2 or 4
words a thread. Where `tuned` is at `twin`, the gather costs nothing and only the memory is left.

    python scripts/bench_hbm_floor.py --out DIR                  # DIR/hbm.parquet and the table
    python scripts/bench_hbm_floor.py --op repkv_forward --out DIR   # DIR/hbm_repkv_forward.parquet
    python scripts/bench_hbm_floor.py --store --out DIR          # every group the store tuned
    python scripts/bench_hbm_floor.py --render DIR/hbm.parquet   # the table again, no GPU

Output: `hbm.parquet` (`hbm_<op>.parquet` for an op other than repkv_backward) in `--out`
(default `docs/runs/`) and the table printed; the tables of docs/hbm-floor.md come from its
H200 runs, `docs/runs/h200_hbm_floor*.log` and `.parquet`.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "docs" / "runs"  # where the runs behind the shipped tables are kept
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # its parts, also when loaded from its path

from bench_hbm_floor_parts.stream import (  # noqa: E402, F401  (the tests import them from here)
    KERNELS,
    KINDS,
    PER_THREAD,
    STREAM_SOURCE,
    streaming_launchers,
    twin_fraction,
    twin_targets,
)
from bench_hbm_floor_parts.table import render, summary  # noqa: E402, F401

from results.schema import DEFAULT_HOLD_US  # noqa: E402
from tuner.cli.presets import DEFAULT_SHAPES  # noqa: E402
from variants import DEFAULT_OP, OPS, DType, Op, Shape, get_dtype, get_op  # noqa: E402

DEVICE_CALLS = 40


def traffic(shape: Shape, dtype: DType, op: Op | None = None) -> tuple[int, int]:
    """(bytes read, bytes written) by the op (default repkv backward): `Op.traffic`, each of its
    inputs read once (freqs_cis too), its output written once."""
    return (op or get_op()).traffic(shape, dtype)


def probe(
    shape: Shape, dtype: DType, session: Any, index: Any, label: str, reps: int, op: Op | None = None
) -> list[dict[str, Any]]:
    """The rows of one (shape, dtype) of `op` (default repkv backward): `session` runs the op's
    families and `index` serves it (`StoreIndex.for_op`)."""
    from results.selection import select
    from tuner.runners.gpu.kernel_profile import trace_calls
    from tuner.runners.gpu.timing import device_copy, time_launches
    from tuner.runners.kernel_trace import device_times

    op = op or get_op()
    served = select(index, label, shape, dtype)
    if served is None:
        raise SystemExit(f"{label}: nothing in the store serves {op.name} {shape.key} {dtype.name}")
    tuned = session.launcher(shape, dtype, served.candidate.config)
    check = session.run_checked(shape, dtype, tuned)
    if not check.ok:
        wrong = f"{op.name} {shape.key} {dtype.name}: the served configuration is wrong"
        raise SystemExit(f"{wrong}: {check.summary()}")
    read_bytes, write_bytes = traffic(shape, dtype, op)
    sides: dict[str, tuple[str, Callable[[], None]]] = {
        "memcpy": ("cudaMemcpyAsync D2D", device_copy((read_bytes + write_bytes) // 2)),
        "tuned": (served.candidate.config.key, tuned),
    }
    timed: dict[str, Any] = {}
    buffers = session.buffers(shape, dtype)
    for kind, variants in streaming_launchers(read_bytes, write_bytes, buffers).items():
        best = None
        for name, launch in variants.items():
            t = time_launches(launch, session.flush, reps=reps)
            if best is None or t.median_ms < best[2].median_ms:
                best = (name, launch, t)
        assert best is not None
        sides[kind] = (best[0], best[1])
        timed[kind] = best[2]
    for side in ("memcpy", "tuned"):
        # the fastest of three medians, as the tuner holds kernels to the copy
        timed[side] = min(
            (time_launches(sides[side][1], session.flush, reps=reps) for _ in range(3)),
            key=lambda t: t.median_ms,
        )
    names = list(sides)
    trace = trace_calls({n: sides[n][1] for n in names}, session.flush, DEVICE_CALLS)
    device = device_times(trace, names, DEVICE_CALLS)
    base = {
        "op": op.name,
        **shape.as_dict(),
        "shape": shape.key,
        "dtype": dtype.name,
        "MB": (read_bytes + write_bytes) / 1e6,
    }
    base |= {
        "read_bytes": read_bytes,
        "write_bytes": write_bytes,
        "gpu": label,
        "hold_us": session.flush.hold_us,
    }
    return [
        base
        | {"side": n, "config": sides[n][0], "time_ms": timed[n].median_ms, "p20_ms": timed[n].p20_ms}
        | {"p80_ms": timed[n].p80_ms, "device_us": device[n].median_us, "device_kernels": device[n].kernels}
        for n in names
    ]


def store_groups(index: Any, label: str, op: Op | None = None) -> list[tuple[Shape, str]]:
    """Every (shape, dtype name) the index holds a winner of `op` (default repkv backward) for
    on this GPU label, smallest first."""
    op = op or get_op()
    groups = sorted(index.for_op(op.name).groups_of(label), key=lambda g: op.bytes_moved(g.shape, g.dtype))
    return [(g.shape, g.dtype.name) for g in groups]


def output_name(op: str) -> str:
    """The run's parquet: hbm.parquet for repkv backward, as before --op; hbm_<op>.parquet else."""
    return "hbm.parquet" if op == DEFAULT_OP else f"hbm_{op}.parquet"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--op", choices=list(OPS), default=DEFAULT_OP, help=f"the op whose traffic (default {DEFAULT_OP})"
    )
    parser.add_argument("--gpu", default="h200", help="the store's label of this GPU (default h200)")
    parser.add_argument("--out", type=Path, default=RUNS, help="directory (default docs/runs)")
    parser.add_argument(
        "--shape", action="append", help="B=..,T=..,NH=..,NH_KV=..,HD=.. (default: the default set)"
    )
    parser.add_argument("--dtype", default="fp32,bf16,fp16")
    parser.add_argument(
        "--store", action="store_true", help="every (shape, dtype) the bundled store holds for --op, --gpu"
    )
    parser.add_argument("--hold-us", type=float, default=DEFAULT_HOLD_US)
    parser.add_argument("--reps", type=int, default=100)
    parser.add_argument("--render", type=Path, help="print the table of an hbm*.parquet and exit")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.render:
        print(render(pd.read_parquet(args.render)))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    op = get_op(args.op)

    from results.index import build_index
    from results.store import bundled_results_dir, load_results
    from tuner.runners.gpu.peers import share_stream_with_torch
    from tuner.runners.gpu.session import DeviceSession

    session = DeviceSession(families=op.families, reps=args.reps, hold_us=args.hold_us)
    share_stream_with_torch(session.device.id)
    index = build_index(load_results(bundled_results_dir())[0]).for_op(op.name)
    identity = session.identity
    print(
        f"{identity.name}, {identity.sm_count} SMs, driver {identity.driver_version}: {op.name}", flush=True
    )
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    shapes = [Shape.parse(s) for s in args.shape] if args.shape else list(DEFAULT_SHAPES)
    groups = [(shape, name) for shape in shapes for name in args.dtype.split(",")]
    if args.store:
        groups = store_groups(index, args.gpu, op)
    for shape, name in groups:
        rows += probe(shape, get_dtype(name), session, index, args.gpu, args.reps, op)
        pd.DataFrame(rows).to_parquet(args.out / output_name(op.name), index=False)
        print(f"{shape.key} {name} [{time.perf_counter() - started:.0f}s]", flush=True)
        session.release()
    print(render(pd.DataFrame(rows)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
