"""The peers benchmark's measuring loop, `PeerBench`: the rows and their parquet, the first
pass over each shape and dtype, then the later passes (bench_kernels_parts.later_passes), with
each peer measured as bench_kernels_parts.peer_measures says. Device access is injected
(bench_kernels_parts.device), so tests run it on CPU fakes."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from results.store import write_frame
from tuner.peers.names import (
    COMPILED,
    COPY_PEER,
    DEVICE_PEERS,
    EAGER,
    H2H_ROUNDS,
    LLMC,
    PEER_KINDS,
    STATUS_OK,
    STATUS_SKIPPED,
    TRITON,
    TRITON_PEER,
    TUNED_PEER,
    compile_peer,
    eager_peer,
    llmc_peer,
)
from tuner.peers.plan import Budget, Costs, Plan
from tuner.peers.rows import derive, make_row
from variants import Config, DType, Shape
from variants.family import BLOCK_SIZES

from .device import Device
from .later_passes import LaterPasses
from .peer_measures import PeerMeasures


def log(start: float, text: str) -> None:
    print(f"[{time.perf_counter() - start:6.1f}s] {text}", flush=True)


class PeerBench(PeerMeasures, LaterPasses):
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
        # (shape key, dtype) -> the copy method that won the copy row (tuner.runners.gpu.timing.COPY_METHODS)
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
