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
- a Triton kernel autotuned over its tile and warps (tuner/gpu/triton_peer.py);
- last, head to head: the tuned kernel and the pair's fastest peer, rebuilt and validated
  again, timed in interleaved rounds (each the fastest of its round medians), so that their
  ratio carries neither the minutes between the passes nor the luck of the fastest of many
  peers timed once.

Every call is timed alike with tuner.gpu.timing: CUDA events around the call, L2 flushed
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
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "docs" / "runs"  # where the runs behind the shipped tables are kept
sys.path.insert(0, str(ROOT))

from results.peaks import peak_gbps  # noqa: E402
from results.schema import DEFAULT_HOLD_US, L2_COLD, L2_STATES  # noqa: E402
from results.store import write_frame  # noqa: E402
from tuner.peer_bench import (  # noqa: E402
    BENCH_SHAPES,
    CEILING,
    COMPILED,
    COPY_PEER,
    DEVICE_CALLS,
    DEVICE_PEERS,
    EAGER,
    EMPTY_PEER,
    H2H_ROUNDS,
    HEAD_TO_HEAD,
    LAUNCH,
    LLMC,
    PEER_GROUPS,
    PEER_KINDS,
    QUICK_DTYPES,
    QUICK_SHAPES,
    STATUS_OK,
    STATUS_SKIPPED,
    TRITON,
    TRITON_PEER,
    TUNED,
    TUNED_PEER,
    Budget,
    Costs,
    Plan,
    compile_peer,
    derive,
    describe,
    eager_peer,
    estimate,
    head_to_head_peer,
    llmc_peer,
    make_row,
    render,
    summary,
)
from variants import DTYPES, Config, DType, InvalidShape, Shape, get_dtype  # noqa: E402
from variants.family import BLOCK_SIZES  # noqa: E402

# Formulations (tuner/gpu/torch_peers.py); listed here so that --help and --estimate need no torch.
EAGER_FORMULATIONS = ("sum_cat", "repeat_kv_bwd", "fp32_sum_cat", "into_slices")
COMPILED_FORMULATIONS = ("sum_cat", "repeat_kv_bwd")
MAX_AUTOTUNE_MODE = "max-autotune-no-cudagraphs"
TRITON_CONFIGS = 5  # len(triton_peer.TILE_CONFIGS): a test keeps the two equal
# the copy row's name of each method of tuner.gpu.timing.COPY_METHODS
COPY_NAMES = {"memcpy": "cudaMemcpyAsync D2D", "kernel": "16-byte copy kernel"}


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


def log(start: float, text: str) -> None:
    print(f"[{time.perf_counter() - start:6.1f}s] {text}", flush=True)


# --- the measuring loop (device access injected, so tests run it on CPU fakes) ----------------


@dataclass
class Device:
    """What the bench uses of the device. On a GPU: `gpu_device`; tests pass CPU fakes."""

    session: Any  # tuner.gpu.session.DeviceSession: buffers, release, run_checked, measure, flush
    xp: Any  # cupy (the array module of the session's buffers)
    time_calls: Callable[..., Any]  # tuner.gpu.timing.time_launches(launch, flush, reps=) -> Timing
    # tuner.gpu.timing.fastest_copy(nbytes, flush, reps=) -> (method, Timing): cudaMemcpyAsync
    # or the 16-byte copy kernel, whichever ran faster
    time_copy: Callable[..., Any]
    empty_launch: Callable[[], None]  # one launch of an empty kernel
    to_torch: Callable[[Any, DType], Any]  # a session buffer as a torch tensor (shared memory)
    to_storage: Callable[[Any, DType], Any]  # a torch tensor as an array of dtype's storage
    torch_device: str  # where torch peers allocate ("cuda")
    name: str = ""
    label: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    # the device-time pass: tuner.gpu.timing.device_copy(nbytes, method) -> a copy's launch, and
    # tuner.gpu.kernel_profile.trace_calls(sides, flush, calls) -> trace events (None: no pass)
    copy_launch: Callable[[int, str], Callable[[], None]] | None = None
    trace_calls: Callable[..., list[dict[str, Any]]] | None = None


# PyTorch's messages after which the CUDA context is unusable (the session's own, for CuPy's
# errors, are tuner.gpu.session.STICKY_ERRORS).
TORCH_STICKY = (
    "illegal memory access",
    "misaligned address",
    "unspecified launch failure",
    "device-side assert",
    "illegal instruction",
)


def is_sticky(message: str) -> bool:
    try:
        from tuner.gpu.session import STICKY_ERRORS
    except ImportError:  # no cupy: nothing ran on a GPU
        STICKY_ERRORS = ()
    return any(marker in message for marker in (*STICKY_ERRORS, *TORCH_STICKY))


def recoverable(exc: Exception) -> str:
    """A failure as a row's message; raised again instead where the CUDA context is lost
    (`is_sticky`), which ends the run."""
    message = f"{type(exc).__name__}: {exc}"
    if is_sticky(message):
        raise exc
    return message


class PeerBench:
    """Measures every peer of the plan, one shape and dtype at a time, into rows."""

    def __init__(
        self,
        plan: Plan,
        device: Device,
        start: float,
        choices: dict[tuple[Shape, str], Any] | None = None,
        peak_gbps: float | None = None,
        out: Path | None = None,
        compile_backend: str = "inductor",
    ):
        import torch

        self.torch = torch
        self.plan, self.device, self.start = plan, device, start
        self.session = device.session
        self.choices = choices or {}
        self.peak_gbps = peak_gbps
        self.out = out
        self.compile_backend = compile_backend
        self.budget = Budget(plan.budget_s, start, Costs(), plan.triton_configs)
        self.rows: list[dict[str, Any]] = []
        # (shape key, dtype, peer) -> a fresh validated launch of a peer that measured ok, for
        # the head-to-head pass (rebuilt then: buffers are released between pairs)
        self.rebuilders: dict[tuple[str, str, str], Callable[[], Callable[[], Any]]] = {}
        # (shape key, dtype) -> the copy method that won the copy row (tuner.gpu.timing.COPY_METHODS)
        self.copy_methods: dict[tuple[str, str], str] = {}

    # --- helpers ---
    def say(self, text: str) -> None:
        log(self.start, text)

    def now(self) -> float:
        return time.perf_counter()

    def timed(self, launch: Callable[[], Any]) -> Any:
        return self.device.time_calls(launch, self.session.timing_flush(), reps=self.plan.reps)

    def add(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        if row["status"] == STATUS_OK:
            compiled = row["compile_s"] == row["compile_s"]  # not NaN
            extra = f" (first call {row['compile_s']:.1f}s)" if compiled else ""
            text = f"{row['time_ms']:.4f} ms [{row['p20_ms']:.4f}, {row['p80_ms']:.4f}]{extra}"
            if row["message"]:
                text += f" {row['message']}"
        else:
            text = f"{row['status']}: {row['message'][:300]}"
        config = f" {row['config']}" if row["config"] else ""
        self.say(f"  {row['peer']:<32} {text}{config}")

    def frame(self) -> pd.DataFrame:
        frame = derive(pd.DataFrame(self.rows), self.peak_gbps)
        for key, value in self.device.meta.items():  # a row's own value (its hold) stands
            frame[key] = frame[key].where(frame[key].notna(), value) if key in frame else value
        return frame

    def write(self) -> None:
        """Rewrite the parquet (atomically, `results.store.write_frame`): a run stopped
        half-way still leaves every row measured so far."""
        if not self.out or not self.rows:
            return
        write_frame(self.frame(), Path(self.out))

    def timing_row(self, shape: Shape, dtype: DType, peer: str, kind: str, timing: Any, **extra: Any) -> None:
        self.add(
            make_row(
                shape,
                dtype,
                peer,
                kind,
                time_ms=timing.median_ms,
                p20_ms=timing.p20_ms,
                p80_ms=timing.p80_ms,
                reps=timing.reps,
                # the hold these calls had, where timing retimed them under a longer one
                **({"hold_us": timing.hold_us} if getattr(timing, "hold_us", 0.0) else {}),
                **extra,
            )
        )

    # --- the references ---
    def copy(self, shape: Shape, dtype: DType) -> None:
        """The device copy of half the bytes (read and written: the kernel's bytes moved):
        the fastest of three medians, each over fresh buffers, of the faster of
        cudaMemcpyAsync and the 16-byte copy kernel (as the tuner holds kernels to)."""
        self.session.release()
        nbytes = shape.bytes_moved(dtype) // 2
        flush = self.session.flush
        rounds = [self.device.time_copy(nbytes, flush, reps=self.plan.reps) for _ in range(3)]
        method, best = min(rounds, key=lambda r: r[1].median_ms)
        self.copy_methods[(shape.key, dtype.name)] = method
        medians = ", ".join(f"{t.median_ms:.4f} ({m})" for m, t in rounds)
        config = f"{COPY_NAMES[method]} of {nbytes} B; medians {medians}"
        self.timing_row(shape, dtype, COPY_PEER, CEILING, best, config=config)

    def empty(self, shape: Shape, dtype: DType) -> None:
        timing = self.timed(self.device.empty_launch)
        self.timing_row(shape, dtype, EMPTY_PEER, LAUNCH, timing, config="empty_kernel<<<1, 1>>>")

    # --- this project's kernels: the session validates, then times ---
    def kernel(
        self, shape: Shape, dtype: DType, peer: str, kind: str, config: Config, note: str = "", **extra: Any
    ) -> None:
        m = self.session.measure(shape, dtype, config)
        if m.status == STATUS_OK:
            self.rebuilders[(shape.key, dtype.name, peer)] = lambda: self.kernel_launch(shape, dtype, config)
        self.add(
            make_row(
                shape,
                dtype,
                peer,
                kind,
                status=m.status,
                message=m.message if m.message else note,
                time_ms=m.time_ms,
                p20_ms=m.p20_ms,
                p80_ms=m.p80_ms,
                reps=m.reps,
                config=config.key,
                **extra,
            )
        )

    def kernel_launch(self, shape: Shape, dtype: DType, config: Config) -> Callable[[], Any]:
        launch = self.session.launcher(shape, dtype, config)
        self.require(self.session.run_checked(shape, dtype, launch))
        return launch

    @staticmethod
    def failure(check: Any) -> str | None:
        """What is wrong with a check's outcome (a Validation, or a message saying the result
        was not a dinp), or None if it is an ok Validation."""
        if isinstance(check, str):
            return check
        return None if check.ok else check.summary()

    def require(self, check: Any) -> None:
        """Raise with the check's words unless it is an ok Validation."""
        message = self.failure(check)
        if message is not None:
            raise ValueError(message)

    def tuned(self, shape: Shape, dtype: DType) -> None:
        choice = self.choices.get((shape, dtype.name))
        if choice is None:
            message = f"nothing in the store for GPU {self.device.label!r} serves this shape and dtype"
            self.add(make_row(shape, dtype, TUNED_PEER, TUNED, status="missing", message=message))
            return
        tuned_from = f"{choice.group.shape.key} {choice.group.dtype.name}"
        note = f"{choice.match}, tuned at {tuned_from}"
        config = choice.candidate.config
        self.kernel(shape, dtype, TUNED_PEER, TUNED, config, note, match=choice.match, tuned_from=tuned_from)

    # --- PyTorch peers ---
    def check_tensor(self, shape: Shape, dtype: DType, call: Callable[[], Any]) -> Any:
        """Fresh random dout; the allocator's free memory of dinp's size poisoned with NaN (the
        call allocates its output there); one call; every element of its result compared with
        the reference. Returns the Validation, or a message when the result is not a dinp."""
        from tuner.gpu.torch_peers import TORCH_DTYPES
        from variants.reference import random_input, validate_output

        torch, xp = self.torch, self.device.xp
        tdtype = TORCH_DTYPES[dtype.name]
        dout, _ = self.session.buffers(shape, dtype)
        dout[...] = random_input(shape, dtype, xp)
        if self.device.torch_device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        poison = torch.full((shape.dinp_numel,), float("nan"), dtype=tdtype, device=self.device.torch_device)
        del poison
        out = call()
        if self.device.torch_device == "cuda":
            torch.cuda.synchronize()
        expected = (shape.B, shape.T, shape.heads_in, shape.HD)
        if tuple(out.shape) != expected or out.dtype != tdtype:
            return f"returned {tuple(out.shape)} {out.dtype}, expected {expected} {tdtype}"
        return validate_output(self.device.to_storage(out, dtype), dout, shape, dtype, xp)

    def tensor_call(
        self, shape: Shape, dtype: DType, name: str, compile_mode: str | None
    ) -> tuple[Callable[[], Any], Any]:
        """The formulation's call on the pair's dout, compiled by its first call if compile_mode
        (then also returns that first call's record, else None)."""
        from tuner.gpu import torch_peers

        dout, _ = self.session.buffers(shape, dtype)
        source = self.device.to_torch(dout, dtype)
        dims = (shape.B, shape.T, shape.NH, shape.NH_KV, shape.HD)
        fn = torch_peers.FORMULATIONS[name]
        if compile_mode is not None:
            fn = torch_peers.compile_formulation(fn, compile_mode, backend=self.compile_backend)

        def call() -> Any:
            return fn(source, *dims)

        first = torch_peers.first_call(call) if compile_mode is not None else None
        return call, first

    def tensor_launch(
        self, shape: Shape, dtype: DType, name: str, compile_mode: str | None
    ) -> Callable[[], Any]:
        call, _ = self.tensor_call(shape, dtype, name, compile_mode)
        self.require(self.check_tensor(shape, dtype, call))
        return call

    def tensor_peer(
        self, shape: Shape, dtype: DType, peer: str, kind: str, name: str, compile_mode: str | None = None
    ) -> None:
        """A PyTorch formulation returning dinp: compiled on its first call (if compile_mode),
        then validated on fresh input, then timed."""
        from tuner.gpu import torch_peers

        extra: dict[str, Any] = {"config": f"mode={compile_mode}" if compile_mode else ""}
        try:
            call, first = self.tensor_call(shape, dtype, name, compile_mode)
            if first is not None:
                what = "compile default" if compile_mode == "default" else "compile max-autotune"
                self.budget.record(what, first.seconds)
                extra.update(compile_s=first.seconds, graphs=first.graphs, kernels=first.kernels)
            check = self.check_tensor(shape, dtype, call)
        except Exception as exc:
            message = recoverable(exc)
            status = "compile_error" if compile_mode is not None else "error"
            self.add(make_row(shape, dtype, peer, kind, status=status, message=message[:2000], **extra))
            return
        message = self.failure(check)
        if message is not None:
            self.add(make_row(shape, dtype, peer, kind, status="wrong_result", message=message, **extra))
            return
        graphs = torch_peers.graphs_compiled()
        timing = self.timed(call)
        notes = []
        if compile_mode is not None and extra.get("graphs") != 1:
            notes.append(f"first call compiled {extra.get('graphs')} graphs")
        if torch_peers.graphs_compiled() != graphs:
            notes.append(f"{torch_peers.graphs_compiled() - graphs} recompiles while timed")
        self.rebuilders[(shape.key, dtype.name, peer)] = lambda: self.tensor_launch(
            shape, dtype, name, compile_mode
        )
        self.timing_row(shape, dtype, peer, kind, timing, message="; ".join(notes), **extra)

    # --- the Triton peer ---
    def triton(self, shape: Shape, dtype: DType) -> None:
        """Autotuned on its first call (every config compiled and timed by Triton), then run
        once more through the session's check (fresh input, dinp poisoned), then timed."""
        try:
            from tuner.gpu import triton_peer
        except ImportError as exc:
            self.add(make_row(shape, dtype, TRITON_PEER, TRITON, status="unavailable", message=str(exc)))
            return
        launch = self.triton_call(shape, dtype)
        config, seconds = "", float("nan")
        try:
            started = self.now()
            launch()
            if self.device.torch_device == "cuda":
                self.torch.cuda.synchronize()
            seconds = self.now() - started
            self.budget.record("triton", seconds)
            config = triton_peer.chosen_config()
            validation = self.session.run_checked(shape, dtype, launch)
        except Exception as exc:
            message = recoverable(exc)
            row = make_row(shape, dtype, TRITON_PEER, TRITON, status="compile_error", message=message[:2000])
            self.add({**row, "compile_s": seconds})
            return
        if not validation.ok:
            message = validation.summary()
            row = make_row(
                shape, dtype, TRITON_PEER, TRITON, status="wrong_result", message=message, config=config
            )
            self.add({**row, "compile_s": seconds})
            return
        self.rebuilders[(shape.key, dtype.name, TRITON_PEER)] = lambda: self.triton_launch(shape, dtype)
        self.timing_row(
            shape, dtype, TRITON_PEER, TRITON, self.timed(launch), config=config, compile_s=seconds
        )

    def triton_call(self, shape: Shape, dtype: DType) -> Callable[[], None]:
        from tuner.gpu import triton_peer

        dout, dinp = self.session.buffers(shape, dtype)
        source, target = self.device.to_torch(dout, dtype), self.device.to_torch(dinp, dtype)
        dims = (shape.B, shape.T, shape.NH, shape.NH_KV, shape.HD)

        def launch() -> None:
            triton_peer.repkv_backward_triton(source, target, *dims)

        return launch

    def triton_launch(self, shape: Shape, dtype: DType) -> Callable[[], None]:
        launch = self.triton_call(shape, dtype)
        self.require(self.session.run_checked(shape, dtype, launch))
        return launch

    def skipped(self, shape: Shape, dtype: DType, peer: str, kind: str, what: str) -> None:
        message = (
            f"time budget: {self.now() - self.start:.0f}s spent of --budget-s {self.plan.budget_s:.0f}; "
            f"{what} expected to take {self.budget.expected(what):.1f}s"
        )
        self.add(make_row(shape, dtype, peer, kind, status=STATUS_SKIPPED, message=message))

    # --- the passes ---
    def first_pass(self, shape: Shape, dtype: DType) -> None:
        """Everything but max-autotune for one shape and dtype."""
        groups = self.plan.groups
        self.copy(shape, dtype)
        self.empty(shape, dtype)
        self.tuned(shape, dtype)
        if "llmc" in groups:
            for block in BLOCK_SIZES:
                self.kernel(shape, dtype, llmc_peer(block), LLMC, Config.of("naive", block=block))
        if "eager" in groups:
            for name in self.plan.eager:
                self.tensor_peer(shape, dtype, eager_peer(name), EAGER, name)
        if "triton" in groups:
            if self.budget.allows("triton", self.now()):
                self.triton(shape, dtype)
            else:
                self.skipped(shape, dtype, TRITON_PEER, TRITON, "triton")
        if "compile" in groups:
            for name in self.plan.compiled:
                peer = compile_peer("default", name)
                if self.budget.allows("compile default", self.now()):
                    self.tensor_peer(shape, dtype, peer, COMPILED, name, compile_mode="default")
                else:
                    self.skipped(shape, dtype, peer, COMPILED, "compile default")
        self.release()

    def release(self) -> None:
        self.session.release()
        if self.device.torch_device == "cuda":
            self.torch.cuda.empty_cache()

    def closeness(self, shape: Shape, dtype: DType) -> float:
        """The fastest peer measured so far over the tuned kernel (lower: a closer race)."""
        rows = [r for r in self.rows if r["shape"] == shape.key and r["dtype"] == dtype.name]
        ok = [r for r in rows if r["status"] == STATUS_OK]
        tuned = [r["time_ms"] for r in ok if r["peer"] == TUNED_PEER]
        peers = [r["time_ms"] for r in ok if r["kind"] in PEER_KINDS]
        if not tuned or not peers:
            return float("inf")
        return min(peers) / tuned[0]

    def second_pass(self) -> None:
        """max-autotune: each formulation in turn, the closest races first, while the budget
        lasts (the others get rows with status 'skipped')."""
        order = sorted(self.plan.pairs, key=lambda pair: self.closeness(*pair))
        for name in self.plan.max_autotune:
            peer = compile_peer(MAX_AUTOTUNE_MODE, name)
            for i, (shape, dtype) in enumerate(order, 1):
                if not self.budget.allows("compile max-autotune", self.now()):
                    self.skipped(shape, dtype, peer, COMPILED, "compile max-autotune")
                    continue
                self.say(f"{peer} {i}/{len(order)}: {shape.key} {dtype.name}")
                self.tensor_peer(shape, dtype, peer, COMPILED, name, compile_mode=MAX_AUTOTUNE_MODE)
                self.release()
            self.write()

    def head_to_head(self, shape: Shape, dtype: DType) -> None:
        """The tuned kernel and the pair's fastest peer, each rebuilt and validated again, then
        timed in H2H_ROUNDS rounds that alternate which goes first; each side's row is its
        median round (the round whose median is the median of the rounds', so that no one round
        decides), every round's median listed in its config."""
        rows = [r for r in self.rows if r["shape"] == shape.key and r["dtype"] == dtype.name]
        ok = [r for r in rows if r["status"] == STATUS_OK]
        peers = [r for r in ok if r["kind"] in PEER_KINDS]
        if not peers or not any(r["peer"] == TUNED_PEER for r in ok):
            return
        fastest = min(peers, key=lambda r: r["time_ms"])["peer"]
        sides = [TUNED_PEER, fastest]
        launches = {}
        for side in sides:
            try:
                launches[side] = self.rebuilders[(shape.key, dtype.name, side)]()
            except Exception as exc:
                message = recoverable(exc)
                for name in sides:
                    peer = head_to_head_peer(name)
                    self.add(
                        make_row(shape, dtype, peer, HEAD_TO_HEAD, status="error", message=message[:2000])
                    )
                self.release()
                return
        medians: dict[str, list[Any]] = {side: [] for side in sides}
        for round_ in range(H2H_ROUNDS):
            for side in sides if round_ % 2 == 0 else sides[::-1]:
                medians[side].append(self.timed(launches[side]))
        for side in sides:
            middle = sorted(medians[side], key=lambda t: t.median_ms)[len(medians[side]) // 2]
            listed = ", ".join(f"{t.median_ms:.4f}" for t in medians[side])
            self.timing_row(
                shape, dtype, head_to_head_peer(side), HEAD_TO_HEAD, middle, config=f"round medians {listed}"
            )
        self.release()

    def device_time(self, shape: Shape, dtype: DType) -> None:
        """The profiled pass (tuner.kernel_trace): the copy, the empty launch, the tuned kernel
        and the DEVICE_PEERS fastest peers by event time, rebuilt and validated again, then
        DEVICE_CALLS flushed calls of each under the profiler; each one's first-pass row gets
        the GPU time of its own kernels and copies per call (median, p20, p80) and their count.
        A side that cannot be rebuilt is left out; a failed trace leaves every row as it was."""
        from tuner.kernel_trace import device_times

        if self.device.trace_calls is None or self.device.copy_launch is None:
            return
        rows = {
            r["peer"]: r
            for r in self.rows
            if r["shape"] == shape.key and r["dtype"] == dtype.name and r["status"] == STATUS_OK
        }
        if TUNED_PEER not in rows:
            return
        peers = sorted((r for r in rows.values() if r["kind"] in PEER_KINDS), key=lambda r: r["time_ms"])
        sides: dict[str, Callable[[], Any]] = {}
        try:
            if COPY_PEER in rows:
                method = self.copy_methods[(shape.key, dtype.name)]  # set with the copy row
                sides[COPY_PEER] = self.device.copy_launch(shape.bytes_moved(dtype) // 2, method)
            if EMPTY_PEER in rows:
                sides[EMPTY_PEER] = self.device.empty_launch
            for peer in [TUNED_PEER, *(r["peer"] for r in peers[:DEVICE_PEERS])]:
                rebuild = self.rebuilders.get((shape.key, dtype.name, peer))
                if rebuild is None:
                    continue
                try:
                    sides[peer] = rebuild()
                except Exception as exc:
                    message = recoverable(exc)
                    self.say(f"device time: {shape.key} {dtype.name} {peer} left out: {message[:300]}")
            names = list(sides)
            times = device_times(
                self.device.trace_calls(sides, self.session.timing_flush(), DEVICE_CALLS), names, DEVICE_CALLS
            )
        except Exception as exc:
            message = recoverable(exc)
            self.say(f"device time: {shape.key} {dtype.name}: not measured: {message[:300]}")
            self.release()
            return
        for name, t in times.items():
            rows[name].update(
                device_us=t.median_us,
                device_p20_us=t.p20_us,
                device_p80_us=t.p80_us,
                device_kernels=t.kernels,
            )
        self.release()

    def pair_line(self, shape: Shape, dtype: DType) -> str:
        rows = [r for r in self.rows if r["shape"] == shape.key and r["dtype"] == dtype.name]
        ok = [r for r in rows if r["status"] == STATUS_OK]
        copy = next((r["time_ms"] for r in ok if r["peer"] == COPY_PEER), float("nan"))
        tuned = next((r["time_ms"] for r in ok if r["peer"] == TUNED_PEER), float("nan"))
        peers = [r for r in ok if r["kind"] in PEER_KINDS]
        text = f"tuned {tuned:.4f} ms = {tuned / copy:.3f}x copy"
        if peers:
            best = min(peers, key=lambda r: r["time_ms"])
            ratio = best["time_ms"] / tuned
            text += f"; fastest peer {best['peer']} {best['time_ms']:.4f} ms ({ratio:.2f}x tuned)"
        return text

    def run(self) -> int:
        """Both passes; returns 1 if the device was lost on the way (rows so far are kept)."""
        pairs = self.plan.pairs
        status = 0
        try:
            for i, (shape, dtype) in enumerate(pairs, 1):
                mb = shape.bytes_moved(dtype) / 1e6
                self.say(f"pair {i}/{len(pairs)}: {shape.key} {dtype.name} ({mb:.1f} MB)")
                self.first_pass(shape, dtype)
                self.write()
                self.say(f"pair {i}/{len(pairs)} done: {self.pair_line(shape, dtype)}")
            if self.plan.max_autotune_peers():
                self.say("max-autotune pass, closest races first")
                self.second_pass()
            if self.plan.head_to_head:
                self.say(f"head to head: the tuned kernel and each fastest peer, {H2H_ROUNDS} rounds")
                for shape, dtype in pairs:
                    self.head_to_head(shape, dtype)
                self.write()
            if self.plan.device_time and self.device.trace_calls is not None:
                sides = f"copy, empty launch, tuned kernel and {DEVICE_PEERS} fastest peers"
                self.say(f"device time: each pair's {sides}, profiled")
                for shape, dtype in pairs:
                    self.device_time(shape, dtype)
                    self.write()
        except Exception as exc:  # the CUDA context is lost (or worse): report what was measured
            self.say(f"stopped: {type(exc).__name__}: {str(exc)[:2000]}")
            status = 1
        self.write()
        return status


def compile_report(frame: pd.DataFrame) -> str:
    """First calls per kind of peer: count, seconds (mean, max, total), graphs, kernels; rows
    by status."""
    lines = []
    compiled = frame[frame["compile_s"].notna()]
    for peer_kind, group in compiled.groupby(compiled["peer"].str.replace(r":.*", "", regex=True)):
        seconds = group["compile_s"]
        line = (
            f"  {peer_kind}: {len(group)} first calls, {seconds.mean():.1f}s mean, "
            f"{seconds.max():.1f}s max, {seconds.sum():.0f}s total"
        )
        graphs = group["graphs"][group["graphs"] >= 0]
        if len(graphs):
            line += f", graphs per compile {sorted(set(graphs.astype(int)))}"
        kernels = group["kernels"][group["kernels"] >= 0]
        if len(kernels):
            line += f", Inductor kernels per compile {sorted(set(kernels.astype(int)))}"
        lines.append(line)
    counts = frame["status"].value_counts().to_dict()
    lines.append("  rows by status: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return "\n".join(lines)


def report(bench: PeerBench) -> str:
    """What the run prints at its end: compiles, failures, then the tables (last)."""
    frame = bench.frame()
    lines = ["", "compiles:", compile_report(frame)]
    failed = frame[~frame["status"].isin([STATUS_OK, STATUS_SKIPPED])]
    for _, r in failed.iterrows():
        lines.append(f"  failed: {r['shape']} {r['dtype']} {r['peer']}: {r['status']}: {r['message'][:300]}")
    lines += ["", render(summary(frame))]
    return "\n".join(lines)


# --- on the GPU ---------------------------------------------------------------------------------


def _version(module: str) -> str:
    try:
        return __import__(module).__version__
    except Exception:
        return ""


def gpu_device(args: argparse.Namespace, plan: Plan) -> Device:
    """The session on GPU 0, its flush followed by the hold, torch on the same stream."""
    import cupy as cp
    import torch

    from tuner.gpu.kernel_profile import trace_calls
    from tuner.gpu.peers import as_storage, as_torch, share_stream_with_torch
    from tuner.gpu.session import DeviceSession
    from tuner.gpu.timing import device_copy, empty_launch, fastest_copy, time_launches
    from tuner.gpus import default_label

    # Every timed call, the session's own (its kernels) included, goes through its flush and hold.
    session = DeviceSession(reps=plan.reps, hold_us=plan.hold_us, l2=plan.l2)
    share_stream_with_torch(session.device.id)
    identity = session.identity
    label = args.gpu or default_label(identity.name)
    meta = {
        "gpu": identity.name,
        "gpu_label": label,
        "run_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "torch_version": torch.__version__,
        "triton_version": _version("triton"),
        "cupy_version": cp.__version__,
        "cuda_version": identity.cuda_version,
        "driver_version": identity.driver_version,
        "hold_us": plan.hold_us,
        "l2": plan.l2,
    }
    return Device(
        session=session,
        xp=cp,
        time_calls=time_launches,
        time_copy=fastest_copy,
        empty_launch=empty_launch(),
        to_torch=as_torch,
        to_storage=as_storage,
        torch_device="cuda",
        name=identity.name,
        label=label,
        meta=meta,
        copy_launch=device_copy if plan.device_time else None,
        trace_calls=trace_calls if plan.device_time else None,
    )


def tuned_choices(
    results: Path | None, label: str, pairs: list[tuple[Shape, DType]], say, l2: str = L2_COLD
) -> dict:
    """(shape, dtype name) -> what the selection serves this GPU label from its own results in
    L2 state `l2` (exact, else nearest; None where nothing can serve). `results`: the directory
    read before the bundled store (default: the user's results directory)."""
    from results.index import build_index
    from results.selection import select
    from results.store import load_results, read_dirs

    dirs = read_dirs(results)
    index = build_index(load_results(dirs)[0]).in_state(l2)
    if label not in index.available_gpus():
        labels = ", ".join(index.available_gpus()) or "none"
        where = ", ".join(str(d) for d in dirs)
        say(f"no results for GPU label {label!r} in {where} (labels there: {labels}); pass --gpu")
    return {(shape, dtype.name): select(index, label, shape, dtype) for shape, dtype in pairs}


def prepare_kernels(
    session: Any, pairs: list[tuple[Shape, DType]], choices: dict, llmc: bool
) -> tuple[int, int]:
    """Compile every CUDA kernel of the run ahead, in parallel threads: (kernels, failures)."""
    work = []
    for shape, dtype in pairs:
        configs = [Config.of("naive", block=b) for b in BLOCK_SIZES] if llmc else []
        choice = choices.get((shape, dtype.name))
        if choice is not None:
            configs.append(choice.candidate.config)
        for config in configs:
            family = session.families[config.family]
            if family.rejection(shape, dtype, config) is None:
                work.append((family, family.name_expression(shape, dtype, config)))
    return len(set(work)), session.kernels.prepare(work)


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
    from tuner.gpu import torch_peers

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
