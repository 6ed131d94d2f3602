"""Benchmark on the GPU: the tuned kernels against the strongest peers, timed in one process.

For every shape and dtype, each validated before it is timed (fresh random input, output
poisoned with NaN, every element compared with the float64 reference):

- the device copy of the same bytes (the practical ceiling: the fastest of three medians, each
  the faster of cudaMemcpyAsync and a 16-byte copy kernel) and
  an empty kernel launch (the fixed cost a launch carries);
- the tuned configuration this GPU's results store serves for the shape (exact, else nearest);
- llm.c's kernel1 at every block size 32..1024 (128 is llm.c's);
- PyTorch eager in four formulations; `torch.compile` specialized to the shape (dynamic=False,
  Dynamo reset before each compile) of two formulations in the default mode, then in
  "max-autotune-no-cudagraphs" (pairs closest to the tuned kernel first, while the time budget
  lasts: each such compile tunes for seconds);
- a Triton kernel autotuned over its tile and warps (tuner/runners/gpu/triton_peer.py);
- last, head to head: the tuned kernel and the pair's fastest peer, rebuilt and validated
  again, timed in interleaved rounds (each the fastest of its round medians), so that their
  ratio carries neither the minutes between the passes nor the luck of the fastest of many
  peers timed once.

Every call is timed alike with tuner.runners.gpu.timing: CUDA events around the call, L2 flushed
before it, then a short GPU-side wait (--hold-us) so the launch is queued before the GPU gets
to it: times are GPU time, whatever the CPU cost of issuing the call (Python, guards,
autotuner lookup). Median and p20/p80 of --reps calls.

    PYTHONUNBUFFERED=1 python3 scripts/bench_kernels.py --out $OUT/peers.parquet 2>&1 | tee $OUT/peers.log
    python3 scripts/bench_kernels.py --quick           # 2 shapes, bf16
    python3 scripts/bench_kernels.py --estimate        # the plan and its time estimate (no GPU)

Output: one parquet row per (shape, dtype, peer), `--out` (default `docs/runs/peers.parquet`),
rewritten after every shape and dtype, and the tables printed last. The tables of
docs/peers.md and docs/l2-state.md come from its H200 runs, `docs/runs/h200_peers*.log` and
`.parquet`. Needs CuPy, PyTorch and Triton (the `bench` use only: the service and
the tuner need none of torch and triton).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "docs" / "runs"  # where the runs behind the shipped tables are kept
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # its parts, also when loaded from its path

from bench_kernels_parts.device import gpu_device  # noqa: E402
from bench_kernels_parts.later_passes import MAX_AUTOTUNE_MODE  # noqa: E402
from bench_kernels_parts.loop import PeerBench, log  # noqa: E402
from bench_kernels_parts.preparation import prepare_kernels, tuned_choices  # noqa: E402
from bench_kernels_parts.report import report  # noqa: E402

from results.peaks import peak_gbps  # noqa: E402
from results.schema import DEFAULT_HOLD_US, L2_COLD, L2_STATES  # noqa: E402
from tuner.peers.names import BENCH_SHAPES, PEER_GROUPS, QUICK_DTYPES, QUICK_SHAPES  # noqa: E402
from tuner.peers.plan import Costs, Plan, describe, estimate  # noqa: E402
from variants import DTYPES, InvalidShape, Shape, get_dtype  # noqa: E402

# What its callers use (scripts/probes/probe_inductor.py, the tests) besides its command line.
__all__ = [
    "COMPILED_FORMULATIONS",
    "EAGER_FORMULATIONS",
    "MAX_AUTOTUNE_MODE",
    "RUNS",
    "TRITON_CONFIGS",
    "PeerBench",
    "UsageError",
    "build_parser",
    "gpu_device",
    "main",
    "make_plan",
    "parse_args",
    "tuned_choices",
]


# Formulations (tuner/runners/gpu/torch_peers.py); listed here so that --help and --estimate need no torch.
EAGER_FORMULATIONS = ("sum_cat", "repeat_kv_bwd", "fp32_sum_cat", "into_slices")
COMPILED_FORMULATIONS = ("sum_cat", "repeat_kv_bwd")
TRITON_CONFIGS = 5  # len(triton_peer.TILE_CONFIGS): a test keeps the two equal


class UsageError(Exception):
    """A mistake in the command line: the message says what to do."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message} (see {self.prog} --help)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="bench_kernels.py", description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", help="label of this GPU's results in the store (default: from the device)")
    parser.add_argument(
        "--results",
        type=Path,
        help="results directory read before the bundled store (default: the user's results directory)",
    )
    parser.add_argument(
        "--shape",
        action="append",
        help="B=..,T=..,NH=..,NH_KV=..,HD=.. (repeatable; default: the tuner's default set + 3 of 8-32 MB)",
    )
    parser.add_argument("--dtype", help="comma list of fp32,bf16,fp16 (default: all)")
    parser.add_argument("--peers", help=f"comma list of {','.join(PEER_GROUPS)} (default: all)")
    parser.add_argument(
        "--max-autotune",
        default=",".join(COMPILED_FORMULATIONS),
        help="formulations compiled in max-autotune mode, in order; 'none' for none (default: %(default)s)",
    )
    parser.add_argument("--quick", action="store_true", help="2 shapes (10 MB, 302 MB), bf16 only")
    parser.add_argument("--reps", type=int, default=100, help="timed calls per peer (default: 100)")
    parser.add_argument(
        "--hold-us",
        type=float,
        default=DEFAULT_HOLD_US,
        help="GPU-side wait after each L2 flush so the timed call is queued ahead, as the tuner "
        "times; 0 to time with the CPU's launch cost exposed (default: %(default)g)",
    )
    parser.add_argument(
        "--l2",
        choices=L2_STATES,
        default=L2_COLD,
        help="what L2 holds at each timed call: cold (flushed, the default) or fed (flushed, then "
        "dout written, as in a training step; the tuned side is then what GET /best?l2=fed serves)",
    )
    parser.add_argument(
        "--budget-s",
        type=float,
        default=450.0,
        help="wall-clock seconds for the run: compiles that would pass it are skipped (rows with "
        "status 'skipped'); 0 for no limit (default: 450)",
    )
    parser.add_argument(
        "--peak-gbps",
        type=float,
        help="the GPU's peak DRAM bandwidth (default: by device name, results/peaks.py)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        help="parquet of every row (default: $OUT/peers.parquet when OUT is set, else in docs/runs)",
    )
    parser.add_argument(
        "--no-head-to-head",
        dest="head_to_head",
        action="store_false",
        help="skip the last pass (the tuned kernel and each pair's fastest peer in interleaved rounds)",
    )
    parser.add_argument(
        "--no-device-time",
        dest="device_time",
        action="store_false",
        help="skip the profiled pass (each pair's copy, tuned kernel and fastest peers: the GPU "
        "time of their own kernels, launch latency excluded)",
    )
    parser.add_argument("--estimate", action="store_true", help="print the plan and time estimate, then exit")
    return parser


def _csv(text: str | None) -> list[str]:
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    args = build_parser().parse_args(argv)
    try:
        shapes = [Shape.parse(text) for text in args.shape or []]
    except InvalidShape as exc:
        raise UsageError(f"--shape: {exc}") from None
    args.shapes = shapes or list(QUICK_SHAPES if args.quick else BENCH_SHAPES)
    dtypes = _csv(args.dtype) or list(QUICK_DTYPES if args.quick else DTYPES)
    unknown = [d for d in dtypes if d not in DTYPES]
    if unknown:
        raise UsageError(f"unknown dtype {unknown[0]!r}: use --dtype with {','.join(DTYPES)}")
    args.dtypes = [get_dtype(d) for d in dict.fromkeys(dtypes)]
    groups = _csv(args.peers) or list(PEER_GROUPS)
    unknown = [g for g in groups if g not in PEER_GROUPS]
    if unknown:
        raise UsageError(f"unknown peer group {unknown[0]!r}: use --peers with {','.join(PEER_GROUPS)}")
    args.groups = [g for g in PEER_GROUPS if g in groups]
    formulations = [] if args.max_autotune.strip() == "none" else _csv(args.max_autotune)
    unknown = [f for f in formulations if f not in COMPILED_FORMULATIONS]
    if unknown:
        raise UsageError(
            f"unknown formulation {unknown[0]!r}: use --max-autotune with {','.join(COMPILED_FORMULATIONS)}"
            " or none"
        )
    args.max_autotune_formulations = list(dict.fromkeys(formulations))
    if args.reps < 1:
        raise UsageError("--reps must be at least 1 (100 or more for a result worth reporting)")
    if args.hold_us < 0 or args.budget_s < 0:
        raise UsageError("--hold-us and --budget-s take a number >= 0")
    if args.out is None:
        args.out = (Path(os.environ["OUT"]) if os.environ.get("OUT") else RUNS) / "peers.parquet"
    return args


def make_plan(args: argparse.Namespace) -> Plan:
    return Plan(
        shapes=args.shapes,
        dtypes=args.dtypes,
        groups=args.groups,
        eager=EAGER_FORMULATIONS,
        compiled=COMPILED_FORMULATIONS,
        max_autotune=args.max_autotune_formulations,
        triton_configs=TRITON_CONFIGS,
        reps=args.reps,
        hold_us=args.hold_us,
        l2=args.l2,
        budget_s=args.budget_s,
        head_to_head=args.head_to_head,
        device_time=args.device_time,
    )


def run(args: argparse.Namespace, plan: Plan) -> int:
    start = time.perf_counter()
    device = gpu_device(args, plan)
    peak = args.peak_gbps or peak_gbps(device.name)
    meta = device.meta
    versions = ", ".join(
        f"{k.removesuffix('_version')} {v or 'absent'}" for k, v in meta.items() if "version" in k
    )
    log(
        start,
        f"{device.name} (label {device.label}); {versions}; peak {peak or 'unknown'} GB/s; "
        f"hold {plan.hold_us:.0f} us; L2 {plan.l2}; out {args.out or '(none)'}",
    )
    from tuner.runners.gpu import torch_peers

    torch_peers.configure_dynamo()
    choices = tuned_choices(args.results, device.label, plan.pairs, lambda text: log(start, text), plan.l2)
    kernels, failed = prepare_kernels(device.session, plan.pairs, choices, "llmc" in plan.groups)
    log(start, f"compiled {kernels} CUDA kernels ahead ({failed} failed)")
    bench = PeerBench(plan, device, start, choices=choices, peak_gbps=peak, out=args.out)
    status = bench.run()
    if not bench.rows:
        return status or 1
    print(report(bench), flush=True)
    log(start, f"done; {len(bench.rows)} rows in {args.out}" if args.out else "done")
    return status


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(argv)
    except UsageError as exc:
        print(f"bench_kernels.py: {exc}", file=sys.stderr)
        return 2
    plan = make_plan(args)
    print(describe(plan, estimate(plan), Costs()), flush=True)
    if args.estimate:
        return 0
    return run(args, plan)


if __name__ == "__main__":
    raise SystemExit(main())
