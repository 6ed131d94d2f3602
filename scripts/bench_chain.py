"""Benchmark on the GPU: the fused GQA chain ops against llm.c's two-kernel chains, timed in one
process (the issue's peer table).

Two pairs: forward, llm.c's repkv_forward + rope_forward against `rope_repkv_forward`; backward,
llm.c's rope_backward_inplace + repkv_backward against `repkv_rope_backward`. For each pair, shape
and dtype, on the fused op's buffers, every peer's output is first compared with the op's float64
reference (fresh random input, output poisoned with NaN; llm.c's backward chain, which rounds
each rotated replica before the sum, to `llmc_chain_tolerance`), then timed:

- `copy`: a device copy of the fused op's own bytes (half read, half written), the faster of
  cudaMemcpyAsync and a 16-byte copy kernel: the ceiling;
- `llm.c chain k1@128`: llm.c's two kernels back to back at its block 128 (repkv kernel1 from
  variants/, RoPE from results/llmc_rope.cuh, llm.c's llmc/rope.cuh; at nrep 1 llm.c's
  repkv_forward is a cudaMemcpy); `llm.c chain best blocks`: each at its fastest block size of
  32..1024 (each kernel timed alone there: the `sweep` rows);
- `best unfused chain`: the store's repkv_forward / repkv_backward configuration for this GPU
  (results.selection.select) and llm.c's RoPE at its best block;
- `fused tuned`: the store's configuration of the fused op (else its generic one);
- `torch.compile[default]`, `torch.compile[max-autotune-no-cudagraphs]`: the same chain written
  in PyTorch (bench_chain_parts/torch_chain.py), compiled for the shape (dynamic=False,
  fullgraph=True); the faster is the torch.compile peer.

Timing: tuner.gpu.timing.time_launches, CUDA events around each call, the L2 flushed before it,
then a GPU-side wait (--hold-us) so the call is queued: the median of --reps calls. The copy and
the main peers are timed in --rounds interleaved rounds, each round in another order; a row
keeps its fastest round's median (all of them in `round_ms`).

    PYTHONUNBUFFERED=1 python3 scripts/bench_chain.py --out docs/runs 2>&1 | tee docs/runs/h200_chain.log
    python3 scripts/bench_chain.py --quick                 # the seed shape, bf16
    python3 scripts/bench_chain.py --estimate              # the plan and its measurements (no GPU)

Outputs, in --out (default $OUT when set, else docs/runs), named `<gpu label>_chain` (--name):
`docs/runs/h200_chain.parquet` (one row per pair, shape, dtype and peer: time_ms, ratio_to_copy,
ratio_to_fused, run_id, gpu_name, ...; rewritten after every case), `docs/runs/h200_chain.md`
(the table, also printed last, with the issue's targets per row: fused <= 0.6x the best unfused
chain at NH/NH_KV = 4, fused >= 8x faster than llm.c's chain at k1@128 in bf16 at the seed
shape, fused <= 1.03x the copy from 32 MB up) and the log, `docs/runs/h200_chain.log`, by tee.
Needs CuPy and PyTorch with Triton (Inductor) on a CUDA GPU.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "docs" / "runs"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # its parts, also when loaded from its path

from bench_chain_parts.plan import (  # noqa: E402
    BENCH_SHAPES,
    COMPILE_MODES,
    PAIRS,
    QUICK_DTYPES,
    QUICK_SHAPES,
    Plan,
    describe,
    new_run_id,
)

from variants import DTYPES, InvalidShape, Shape, get_dtype  # noqa: E402


class UsageError(Exception):
    """A mistake in the command line: the message says what to do."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message} (see {self.prog} --help)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="bench_chain.py", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, help="directory of the parquet and markdown (default: $OUT, else docs/runs)"
    )
    parser.add_argument(
        "--name", help="file name of the outputs, without suffix (default: <gpu label>_chain)"
    )
    parser.add_argument("--quick", action="store_true", help="the seed shape, bf16 only")
    parser.add_argument(
        "--shapes",
        nargs="+",
        action="extend",
        metavar="SHAPE",
        help="B=..,T=..,NH=..,NH_KV=..,HD=.. (several, or ';' between; default: the seed and 4 more)",
    )
    parser.add_argument("--dtypes", help=f"comma list of {','.join(DTYPES)} (default: all)")
    parser.add_argument("--pairs", help=f"comma list of {','.join(PAIRS)} (default: both)")
    parser.add_argument(
        "--compile-modes",
        default=",".join(COMPILE_MODES),
        help="torch.compile modes, each a peer; 'none' for none (default: %(default)s)",
    )
    parser.add_argument("--reps", type=int, default=100, help="timed calls per measurement (default: 100)")
    parser.add_argument(
        "--rounds", type=int, default=3, help="interleaved rounds of the main peers (default: 3)"
    )
    parser.add_argument(
        "--hold-us", type=float, default=150.0, help="GPU-side wait after each flush (default: %(default)g)"
    )
    parser.add_argument(
        "--budget-s",
        type=float,
        default=540.0,
        help="wall-clock seconds after which torch.compile is skipped (rows 'skipped'; default: %(default)g)",
    )
    parser.add_argument("--gpu", help="label of this GPU's results in the store (default: from the device)")
    parser.add_argument(
        "--results", type=Path, help="results directory read before the bundled store (default: the user's)"
    )
    parser.add_argument(
        "--estimate", action="store_true", help="print the plan and its measurements, then exit"
    )
    return parser


def _csv(text: str | None) -> list[str]:
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def parse_shapes(texts: list[str]) -> list[Shape]:
    shapes = []
    for text in (part.strip() for t in texts for part in t.split(";")):
        if not text:
            continue
        try:
            shape = Shape.parse(text)
        except InvalidShape as exc:
            raise UsageError(f"--shapes: {exc}") from None
        if shape.HD % 2:
            raise UsageError(f"--shapes: HD={shape.HD} in {text!r} is odd; RoPE rotates (2i, 2i+1) pairs")
        shapes.append(shape)
    return list(dict.fromkeys(shapes))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    args = build_parser().parse_args(argv)
    shapes = parse_shapes(args.shapes or [])
    args.shape_list = shapes or list(QUICK_SHAPES if args.quick else BENCH_SHAPES)
    dtypes = _csv(args.dtypes) or list(QUICK_DTYPES if args.quick else DTYPES)
    unknown = [d for d in dtypes if d.lower() not in DTYPES]
    if unknown:
        raise UsageError(f"unknown dtype {unknown[0]!r}: use --dtypes with {','.join(DTYPES)}")
    args.dtype_list = list(dict.fromkeys(get_dtype(d) for d in dtypes))
    pairs = _csv(args.pairs) or list(PAIRS)
    unknown = [p for p in pairs if p not in PAIRS]
    if unknown:
        raise UsageError(f"unknown pair {unknown[0]!r}: use --pairs with {','.join(PAIRS)}")
    args.pair_list = [PAIRS[p] for p in PAIRS if p in pairs]
    modes = [] if args.compile_modes.strip() == "none" else _csv(args.compile_modes)
    unknown = [m for m in modes if m not in COMPILE_MODES]
    if unknown:
        raise UsageError(
            f"unknown mode {unknown[0]!r}: use --compile-modes with {','.join(COMPILE_MODES)} or none"
        )
    args.modes = list(dict.fromkeys(modes))
    if args.reps < 1 or args.rounds < 1:
        raise UsageError(
            "--reps and --rounds take a number >= 1 (100 reps or more for a result worth reporting)"
        )
    if args.hold_us < 0 or args.budget_s < 0:
        raise UsageError("--hold-us and --budget-s take a number >= 0")
    if args.out is None:
        args.out = Path(os.environ["OUT"]) if os.environ.get("OUT") else RUNS
    return args


def make_plan(args: argparse.Namespace) -> Plan:
    return Plan(
        pairs=tuple(args.pair_list),
        shapes=tuple(args.shape_list),
        dtypes=tuple(args.dtype_list),
        modes=tuple(args.modes),
        reps=args.reps,
        rounds=args.rounds,
        hold_us=args.hold_us,
        budget_s=args.budget_s,
    )


def run(args: argparse.Namespace, plan: Plan) -> int:
    """The GPU half: measure every case, write the parquet after each, then the table."""
    import cupy as cp
    from bench_chain_parts.choices import load_index
    from bench_chain_parts.gpu import ChainBench
    from bench_chain_parts.report import frame_of, render

    from results.writing import write_frame
    from tuner.run.gpus import default_label

    start = time.perf_counter()

    def say(text: str) -> None:
        print(f"[{time.perf_counter() - start:6.1f}s] {text}", flush=True)

    name = cp.cuda.runtime.getDeviceProperties(0)["name"]
    name = name.decode() if isinstance(name, bytes) else str(name)
    label = args.gpu or default_label(name)
    stem = args.name or (f"{label}_chain_quick" if args.quick else f"{label}_chain")
    parquet, md = args.out / f"{stem}.parquet", args.out / f"{stem}.md"
    run_id = new_run_id(label)
    say(f"{name} (label {label}); run {run_id}; out {parquet}")
    bench = ChainBench(
        plan, load_index(args.results), label, run_id, say, lambda: time.perf_counter() - start
    )
    bench.run(lambda: write_frame(frame_of(bench.rows), parquet))
    frame = frame_of(bench.rows)
    write_frame(frame, parquet)
    table = render(frame)
    md.parent.mkdir(parents=True, exist_ok=True)
    md.write_text(table + "\n")
    print("\n" + table, flush=True)
    say(f"done; {len(frame)} rows in {parquet}, the table in {md}")
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(argv)
    except UsageError as exc:
        print(f"bench_chain.py: {exc}", file=sys.stderr)
        return 2
    plan = make_plan(args)
    print(describe(plan), flush=True)
    if args.estimate:
        return 0
    return run(args, plan)


if __name__ == "__main__":
    raise SystemExit(main())
