"""The HBM's floor for this kernel's traffic: how close to the copy can any kernel get?

repkv backward reads dout (3*NH heads a token) and writes dinp (NH + 2*NH_KV heads): more is read
than written, so it may beat a copy of half its bytes, which reads and writes as many. By how
much depends on the memory, not on the kernel. On each shape and dtype this times, in one
process and as the tuner times (L2 flushed before every call, the hold after it; median of
`--reps`), plus the profiler's device time of each:

- `memcpy`: cudaMemcpyAsync of half the bytes (the copy the ratios are to), and `copy`: the
  same bytes copied by a 16-byte kernel;
- `read`: a kernel that only reads dout's bytes; `write`: one that only writes dinp's;
  `read+write` is their sum, the time if reads and writes cost what they cost alone;
- `twin`: one kernel that reads dout's bytes and writes dinp's, both streams contiguous and
  interleaved at the kernel's ratio, with no gather and no sum: this traffic at its simplest;
- `tuned`: the configuration the selection serves from the bundled store.

The table gives each over the memcpy, and the tuned kernel over the twin and over the faster
of the two copies (the copy the tuner holds kernels to since `copy_method` "fastest").

Each streaming kernel is the fastest of 16-byte words at 256 or 512 threads and 1, 2 or 4
words a thread. Where `tuned` is at `twin`, the gather costs nothing and only the memory is left.

    python scripts/bench_hbm_floor.py --out DIR                  # DIR/hbm.parquet and the table
    python scripts/bench_hbm_floor.py --store --out DIR          # every group the store tuned
    python scripts/bench_hbm_floor.py --render DIR/hbm.parquet   # the table again, no GPU

Output: `hbm.parquet` in `--out` (default `docs/runs/`) and the table printed; the tables of
docs/hbm-floor.md come from its H200 runs, `docs/runs/h200_hbm_floor*.log` and `.parquet`.
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

from results.schema import DEFAULT_HOLD_US  # noqa: E402
from tuner.cli.presets import DEFAULT_SHAPES  # noqa: E402
from variants import DType, Shape, get_dtype  # noqa: E402

WORD = 16  # bytes per load and store of the streaming kernels
BLOCKS = (256, 512)
PER_THREAD = (1, 2, 4)
KINDS = ("read", "write", "copy", "twin")
DEVICE_CALLS = 40

# Word i of a thread is base + k*blockDim.x, k < PER: each warp's accesses are contiguous.
# twin: input word j is written to output word o(j) = (j * f) >> 32 with f = W/R in 32.32 fixed
# point, by the one j where o steps (o(j+1) > o(j)): so about W of the R threads store, in order,
# and reads and writes stay interleaved at the ratio R:W all through the kernel.
STREAM_SOURCE = r"""
template <int PER> __global__ void hbm_read(const uint4* __restrict__ src, long long n, uint4* sink) {
    const long long base = (long long)blockIdx.x * blockDim.x * PER + threadIdx.x;
    unsigned acc = 0;
#pragma unroll
    for (int k = 0; k < PER; k++) {
        const long long i = base + (long long)k * blockDim.x;
        if (i < n) { const uint4 w = src[i]; acc ^= w.x ^ w.y ^ w.z ^ w.w; }
    }
    if (acc == 0x9E3779B9u) sink[0] = make_uint4(acc, 0, 0, 0);  // never, with the fill: keeps the loads
}
template <int PER> __global__ void hbm_write(uint4* __restrict__ dst, long long n) {
    const long long base = (long long)blockIdx.x * blockDim.x * PER + threadIdx.x;
#pragma unroll
    for (int k = 0; k < PER; k++) {
        const long long i = base + (long long)k * blockDim.x;
        if (i < n) dst[i] = make_uint4(unsigned(i), 0, 0, 0);
    }
}
template <int PER>
__global__ void hbm_copy(uint4* __restrict__ dst, const uint4* __restrict__ src, long long n) {
    const long long base = (long long)blockIdx.x * blockDim.x * PER + threadIdx.x;
#pragma unroll
    for (int k = 0; k < PER; k++) {
        const long long i = base + (long long)k * blockDim.x;
        if (i < n) dst[i] = src[i];
    }
}
template <int PER>
__global__ void hbm_twin(uint4* __restrict__ dst, const uint4* __restrict__ src, long long n,
                         unsigned long long f) {
    const long long base = (long long)blockIdx.x * blockDim.x * PER + threadIdx.x;
    uint4 w[PER];
#pragma unroll
    for (int k = 0; k < PER; k++) {
        const long long i = base + (long long)k * blockDim.x;
        if (i < n) w[k] = src[i];
    }
#pragma unroll
    for (int k = 0; k < PER; k++) {
        const unsigned long long i = base + (long long)k * blockDim.x;
        const unsigned long long o = (i * f) >> 32;
        if (i < (unsigned long long)n && ((i + 1) * f) >> 32 > o) dst[o] = w[k];
    }
}
"""


def traffic(shape: Shape, dtype: DType) -> tuple[int, int]:
    """(bytes read, bytes written) by repkv backward: all of dout, all of dinp."""
    return shape.dout_numel * dtype.itemsize, shape.dinp_numel * dtype.itemsize


def twin_fraction(read_words: int, write_words: int) -> int:
    """write/read words in 32.32 fixed point, rounded up: twin's step between output words (so
    the last of read_words steps lands on write_words exactly, and every output word is stored)."""
    return -(-(write_words << 32) // read_words)


def twin_targets(read_words: int, write_words: int) -> list[int]:
    """The output word each input word of the twin stores to, in order (-1: none): the kernel's
    index math, for the tests."""
    f = twin_fraction(read_words, write_words)
    return [(j * f) >> 32 if ((j + 1) * f) >> 32 > (j * f) >> 32 else -1 for j in range(read_words)]


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (shape, dtype): each side's time over the memcpy's, event-timed and by
    device time, and the tuned kernel over the twin."""
    out = []
    for (shape, dtype), g in frame.groupby(["shape", "dtype"], sort=False):
        t = g.set_index("side")
        row: dict[str, Any] = {"shape": shape, "dtype": dtype, "MB": float(g["MB"].iloc[0])}
        for basis, col in (("", "time_ms"), ("dev ", "device_us")):
            copy = t.at["memcpy", col]
            rw = t.at["read", col] + t.at["write", col]
            row[f"{basis}copy kernel"] = t.at["copy", col] / copy
            row[f"{basis}read+write"] = rw / copy
            row[f"{basis}twin"] = t.at["twin", col] / copy
            row[f"{basis}tuned"] = t.at["tuned", col] / copy
            row[f"{basis}tuned/twin"] = t.at["tuned", col] / t.at["twin", col]
            row[f"{basis}tuned/fastest copy"] = t.at["tuned", col] / min(copy, t.at["copy", col])
        out.append(row)
    return pd.DataFrame(out)


def render(frame: pd.DataFrame) -> str:
    table = summary(frame)
    cols = [c for c in table.columns if c not in ("shape", "dtype", "MB")]
    head = "| shape | dtype | MB | " + " | ".join(cols) + " |"
    lines = [
        "Time over the same run's cudaMemcpy of half the bytes (event-timed, then 'dev': device time):",
        "",
        head,
        "|---|---|--:|" + "--:|" * len(cols),
    ]
    for _, r in table.iterrows():
        cells = " | ".join(f"{r[c]:.3f}" for c in cols)
        lines.append(f"| {r['shape']} | {r['dtype']} | {r['MB']:.1f} | {cells} |")
    return "\n".join(lines)


# --- on the GPU ---------------------------------------------------------------------------------


def streaming_launchers(shape: Shape, dtype: DType, session: Any) -> dict[str, dict[str, Callable[[], None]]]:
    """kind -> {variant name: launch} over the shape's own buffers (dout filled with ones)."""
    import cupy as cp

    dout, dinp = session.buffers(shape, dtype)
    dout.view(cp.uint8).fill(1)
    read_bytes, write_bytes = traffic(shape, dtype)
    rw, ww = read_bytes // WORD, write_bytes // WORD
    half = (read_bytes + write_bytes) // 2 // WORD
    src, dst = dout.view(cp.uint8)[: rw * WORD], dinp.view(cp.uint8)[: ww * WORD]
    sink = cp.empty(WORD, dtype=cp.uint8)
    copy_src = cp.ones(half * WORD, dtype=cp.uint8)
    copy_dst = cp.empty(half * WORD, dtype=cp.uint8)
    module = _module()
    f = cp.uint64(twin_fraction(rw, ww))
    out: dict[str, dict[str, Callable[[], None]]] = {kind: {} for kind in KINDS}
    for block in BLOCKS:
        for per in PER_THREAD:

            def grid(n: int, block: int = block, per: int = per) -> tuple[int]:
                return (-(-n // (block * per)),)

            name = f"block={block},per={per}"
            k = {kind: module.get_function(f"hbm_{kind}<{per}>") for kind in KINDS}
            out["read"][name] = _bind(k["read"], grid(rw), block, (src, cp.int64(rw), sink))
            out["write"][name] = _bind(k["write"], grid(ww), block, (dst, cp.int64(ww)))
            out["copy"][name] = _bind(k["copy"], grid(half), block, (copy_dst, copy_src, cp.int64(half)))
            out["twin"][name] = _bind(k["twin"], grid(rw), block, (dst, src, cp.int64(rw), f))
    return out


def _bind(kernel: Any, grid: tuple[int], block: int, args: tuple) -> Callable[[], None]:
    def launch() -> None:
        kernel(grid, (block,), args)

    return launch


_MODULE: Any = None


def _module() -> Any:
    global _MODULE
    if _MODULE is None:
        import cupy as cp

        names = [f"hbm_{kind}<{per}>" for kind in KINDS for per in PER_THREAD]
        _MODULE = cp.RawModule(code=STREAM_SOURCE, options=("-std=c++17",), name_expressions=names)
    return _MODULE


def probe(
    shape: Shape, dtype: DType, session: Any, index: Any, label: str, reps: int
) -> list[dict[str, Any]]:
    from results.selection import select
    from tuner.runners.gpu.kernel_profile import trace_calls
    from tuner.runners.gpu.timing import device_copy, time_launches
    from tuner.runners.kernel_trace import device_times

    served = select(index, label, shape, dtype)
    if served is None:
        raise SystemExit(f"{label}: nothing in the store serves {shape.key} {dtype.name}")
    tuned = session.launcher(shape, dtype, served.candidate.config)
    check = session.run_checked(shape, dtype, tuned)
    if not check.ok:
        raise SystemExit(f"{shape.key} {dtype.name}: the served configuration is wrong: {check.summary()}")
    read_bytes, write_bytes = traffic(shape, dtype)
    sides: dict[str, tuple[str, Callable[[], None]]] = {
        "memcpy": ("cudaMemcpyAsync D2D", device_copy((read_bytes + write_bytes) // 2)),
        "tuned": (served.candidate.config.key, tuned),
    }
    timed: dict[str, Any] = {}
    for kind, variants in streaming_launchers(shape, dtype, session).items():
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


def store_groups(index: Any, label: str) -> list[tuple[Shape, str]]:
    """Every (shape, dtype name) the index holds a winner for on this GPU label, smallest first."""
    groups = sorted(index.groups_of(label), key=lambda g: g.shape.bytes_moved(g.dtype))
    return [(g.shape, g.dtype.name) for g in groups]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", default="h200", help="the store's label of this GPU (default h200)")
    parser.add_argument("--out", type=Path, default=RUNS, help="directory (default docs/runs)")
    parser.add_argument(
        "--shape", action="append", help="B=..,T=..,NH=..,NH_KV=..,HD=.. (default: the default set)"
    )
    parser.add_argument("--dtype", default="fp32,bf16,fp16")
    parser.add_argument(
        "--store", action="store_true", help="every (shape, dtype) the bundled store holds for --gpu, instead"
    )
    parser.add_argument("--hold-us", type=float, default=DEFAULT_HOLD_US)
    parser.add_argument("--reps", type=int, default=100)
    parser.add_argument("--render", type=Path, help="print the table of an hbm.parquet and exit")
    args = parser.parse_args()
    if args.render:
        print(render(pd.read_parquet(args.render)))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)

    from results.index import build_index
    from results.store import bundled_results_dir, load_results
    from tuner.runners.gpu.peers import share_stream_with_torch
    from tuner.runners.gpu.session import DeviceSession

    session = DeviceSession(reps=args.reps, hold_us=args.hold_us)
    share_stream_with_torch(session.device.id)
    index = build_index(load_results(bundled_results_dir())[0])
    identity = session.identity
    print(f"{identity.name}, {identity.sm_count} SMs, driver {identity.driver_version}", flush=True)
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    shapes = [Shape.parse(s) for s in args.shape] if args.shape else list(DEFAULT_SHAPES)
    groups = [(shape, name) for shape in shapes for name in args.dtype.split(",")]
    if args.store:
        groups = store_groups(index, args.gpu)
    for shape, name in groups:
        rows += probe(shape, get_dtype(name), session, index, args.gpu, args.reps)
        pd.DataFrame(rows).to_parquet(args.out / "hbm.parquet", index=False)
        print(f"{shape.key} {name} [{time.perf_counter() - started:.0f}s]", flush=True)
        session.release()
    print(render(pd.DataFrame(rows)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
