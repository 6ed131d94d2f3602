"""Does a cheaper bf16 unpack speed the memory-bound kernels up? `Vec::accumulate` widens each
bf16 element on its own (the compiler emits a PRMT and a shift per element); a 32-bit pair can
be widened with one shift (low half) and one mask (high half). For each bf16 group of the
bundled store at the given shapes, the stored winner is timed as shipped and with that unpack
(the family's source patched, so a separate kernel), beside the same-run device copy, over
interleaved rounds (the fastest median of each kept), in one GPU process; every output is
checked against the reference. Nothing is written to the store.

    python scripts/probes/probe_bf16_unpack.py --op repkv_rope_backward --out DIR   # DIR/bf16_unpack.parquet
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from results.index import build_index  # noqa: E402
from results.store import bundled_results_dir, load_results  # noqa: E402
from variants import Shape, get_dtype, get_op  # noqa: E402
from variants.family import Family  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from interleaved import fastest_interleaved  # noqa: E402

SHAPES = (
    "B=16,T=4096,NH=14,NH_KV=2,HD=64",
    "B=4,T=2048,NH=28,NH_KV=4,HD=128",
    "B=8,T=1024,NH=32,NH_KV=8,HD=128",
)

ORIGINAL = """    static __device__ __forceinline__ void accumulate(float (&acc)[N], W w) {
        T e[N];
        memcpy(e, &w, sizeof(W));
#pragma unroll
        for (int i = 0; i < N; i++) acc[i] += to_float(e[i]);
    }"""
PAIRED = """    static __device__ __forceinline__ void accumulate(float (&acc)[N], W w) {
        if constexpr (IsBf16<T>::value && N % 2 == 0) {  // a pair: low half << 16, high half masked
            unsigned u[N / 2];
            memcpy(u, &w, sizeof(W));
#pragma unroll
            for (int i = 0; i < N / 2; i++) {
                acc[2 * i] += __uint_as_float(u[i] << 16);
                acc[2 * i + 1] += __uint_as_float(u[i] & 0xffff0000u);
            }
        } else {
            T e[N];
            memcpy(e, &w, sizeof(W));
#pragma unroll
            for (int i = 0; i < N; i++) acc[i] += to_float(e[i]);
        }
    }"""
TRAIT = """template <typename T> struct IsBf16 { static constexpr bool value = false; };
template <> struct IsBf16<__nv_bfloat16> { static constexpr bool value = true; };

// N = VEC_BYTES"""


def patched(family: Family) -> Family:
    """A copy of `family` whose source widens bf16 pairs with a shift and a mask."""
    source = family.source
    assert ORIGINAL in source and "// N = VEC_BYTES" in source, "Vec::accumulate changed: update the probe"
    source = source.replace(ORIGINAL, PAIRED).replace("// N = VEC_BYTES", TRAIT, 1)
    twin = copy.copy(family)
    twin.__dict__["source"] = source
    twin.__dict__["source_hash"] = hashlib.sha256(source.encode()).hexdigest()[:16]
    return twin


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", default="repkv_rope_backward")
    parser.add_argument("--gpu", default="h200", help="the store's GPU label to take the winners from")
    parser.add_argument("--shape", action="append", help="B=..,T=..,NH=..,NH_KV=..,HD=.. (default: SHAPES)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    from tuner.runners.gpu.session import DeviceSession

    op = get_op(args.op)
    index = build_index(load_results(bundled_results_dir())[0]).for_op(op.name)
    bf16 = get_dtype("bf16")
    work = []
    for text in args.shape or SHAPES:
        shape = Shape.parse(text)
        group = next(
            (g for g in index.groups_of(args.gpu) if g.shape == shape and g.dtype.name == "bf16"), None
        )
        if group is None:
            print(f"{shape}: no bf16 group of {op.name} on {args.gpu}", flush=True)
            continue
        work.append((shape, group.best.config))
    shipped = DeviceSession(families=op.families)
    paired = DeviceSession(families={name: patched(f) for name, f in op.families.items()})
    rows: list[dict[str, Any]] = []
    for shape, config in work:
        timed = {"shipped": (shipped, config), "paired": (paired, config)}
        best, copy_ms = fastest_interleaved(shape, bf16, timed, args.rounds)
        print(
            f"{op.name} {shape} bf16 {config.key}: copy {copy_ms * 1e3:.1f} us, shipped "
            f"{best['shipped'] / copy_ms:.3f}x, paired unpack {best['paired'] / copy_ms:.3f}x "
            f"({best['paired'] / best['shipped']:.3f})",
            flush=True,
        )
        rows.append(
            {**shape.as_dict(), "op": op.name, "config": config.key, "copy_ms": copy_ms}
            | {f"{k}_ms": v for k, v in best.items()}
            | {"paired_vs_shipped": best["paired"] / best["shipped"], "params": json.dumps(config.values)}
        )
    pd.DataFrame(rows).to_parquet(args.out / "bf16_unpack.parquet", index=False)
    shipped.release()
    paired.release()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
