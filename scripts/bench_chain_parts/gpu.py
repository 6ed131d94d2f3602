"""The chain benchmark's GPU half: per (pair, shape, dtype), every peer built on the fused op's
buffers of one DeviceSession and checked against the float64 reference (bench_chain_parts.
gpu_peers), then timed with CUDA events after an L2 flush (tuner.gpu.timing.time_launches), the
main peers in interleaved rounds."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import cupy as cp
import torch

from tuner.runners.gpu import torch_peers
from tuner.runners.gpu.kernels import Kernels
from tuner.runners.gpu.peers import share_stream_with_torch
from tuner.runners.gpu.session import DeviceSession
from tuner.runners.gpu.timing import copy_launchers
from variants import OPS, Config, DType, Shape

from .choices import served
from .gpu_peers import Launch, Peers
from .llmc import LLMC_BLOCK, OPTIONS, rope_expression, rope_source
from .plan import (
    CEILING,
    COMPILED,
    COPY,
    COPY_METHODS,
    FUSED,
    FUSED_KIND,
    LLMC,
    LLMC_BEST,
    LLMC_SEED,
    STATUS_SKIPPED,
    SWEEP,
    SWEEP_BLOCKS,
    UNFUSED,
    UNFUSED_KIND,
    Plan,
    compile_peer,
    memcpy_forward,
    sweep_peer,
)

KINDS = {LLMC_SEED: LLMC, LLMC_BEST: LLMC, UNFUSED: UNFUSED_KIND, FUSED: FUSED_KIND}


class ChainBench:
    """Every case of the plan, one pair (one DeviceSession on the fused op's families) at a time.
    `index`: the results store's (bench_chain_parts.choices.load_index); `label`: this GPU's
    label there; `elapsed()`: seconds since the run began (for --budget-s)."""

    def __init__(
        self,
        plan: Plan,
        index: Any,
        label: str,
        run_id: str,
        say: Callable[[str], None],
        elapsed: Callable[[], float],
    ):
        self.plan, self.index, self.label, self.run_id = plan, index, label, run_id
        self.say, self.elapsed = say, elapsed
        self.rows: list[dict[str, Any]] = []
        self.gpu_name = ""
        self.capability = int(cp.cuda.Device().compute_capability)  # "90" on Hopper
        torch_peers.configure_dynamo()

    def served(self, op_name: str, shape: Shape, dtype: DType) -> tuple[Config, str]:
        """What the op serves on this GPU (`choices.served`)."""
        return served(self.index, self.label, op_name, shape, dtype, self.capability)

    def run(self, after_case: Callable[[], None]) -> None:
        for pair in self.plan.pairs:
            session = DeviceSession(families=pair.op.families, reps=self.plan.reps, hold_us=self.plan.hold_us)
            self.gpu_name = session.identity.name
            share_stream_with_torch(session.device.id)
            repkv = Kernels(OPS[pair.repkv].families)
            expressions = [rope_expression(d, pair.backward) for d in self.plan.dtypes]
            module = cp.RawModule(code=rope_source(), options=OPTIONS, name_expressions=expressions)
            for shape in self.plan.shapes:
                for dtype in self.plan.dtypes:
                    rope = module.get_function(rope_expression(dtype, pair.backward))
                    Case(self, session, repkv, rope, pair, shape, dtype).run()
                    after_case()
                    torch.cuda.empty_cache()
            session.release()
            del session


class Case(Peers):
    """One (pair, shape, dtype): llm.c's chain at every block (each kernel then timed alone), the
    peers built and checked, then the rounds."""

    def run(self) -> None:
        pair, shape, dtype = self.pair, self.shape, self.dtype
        self.bench.say(f"{pair.name} {shape} {dtype.name}: {self.op.bytes_moved(shape, dtype) / 1e6:.1f} MB")
        self.launches: dict[str, Launch] = {}
        self.configs: dict[str, str] = {}
        self.compile_s: dict[str, float] = {}
        best = self.sweep()
        if best is None:
            for peer, kind in ((LLMC_BEST, LLMC), (UNFUSED, UNFUSED_KIND)):
                self.row(peer, kind, status="unavailable", message="llm.c's chain ran at no block size")
        else:
            best_repkv, best_rope = best
            what = "cudaMemcpy" if best_repkv is None else f"k1@{best_repkv}"
            label = f"repkv {what} + rope@{best_rope}"
            self.add(LLMC_BEST, lambda: (self.chain(self.repkv_k1(best_repkv), self.rope(best_rope)), label))

            def unfused() -> tuple[Launch, str]:
                config, how = self.bench.served(pair.repkv, shape, dtype)
                text = f"{pair.repkv} {config.key} ({how}) + llm.c rope@{best_rope}"
                return self.chain(self.repkv_config(config), self.rope(best_rope)), text

            self.add(UNFUSED, unfused)

        def fused() -> tuple[Launch, str]:
            config, how = self.bench.served(pair.fused, shape, dtype)
            return self.session.launcher(shape, dtype, config), f"{config.key} ({how})"

        self.add(FUSED, fused, op=self.op)
        torch._dynamo.reset()
        for mode in self.bench.plan.modes:
            self.add_compiled(mode)
        self.rounds()

    def add(self, peer: str, build: Callable[[], tuple[Launch, str]], op: Any = None) -> None:
        """A main peer, checked (to the chain's tolerance unless `op` says otherwise)."""
        configs: dict[str, str] = {}

        def built() -> tuple[Launch, str]:
            launch, configs[peer] = build()
            return launch, configs[peer]

        launch = self.attempt(peer, KINDS.get(peer, COMPILED), built, op or self.chain_op)
        if launch is not None:
            self.launches[peer], self.configs[peer] = launch, configs[peer]

    def add_compiled(self, mode: str) -> None:
        peer = compile_peer(mode)
        if self.bench.elapsed() > self.bench.plan.budget_s:
            message = f"past the time budget ({self.bench.plan.budget_s:.0f} s)"
            self.row(peer, COMPILED, status=STATUS_SKIPPED, message=message)
            return
        record: dict[str, Any] = {}
        checked = self.attempt(peer, COMPILED, lambda: self.compiled(mode, record), self.chain_op)
        if checked is not None:  # timed without the check's poisoning of the allocator
            self.launches[peer] = record["call"]
            self.configs[peer] = f"mode={mode}, dynamic=False"
            self.compile_s[peer] = record["compile_s"]

    def sweep(self) -> tuple[int | None, int] | None:
        """llm.c's chain checked at every block size (k1@128, llm.c's own, a main peer), each of
        its kernels timed alone there (the sweep rows): the best (repkv, rope) blocks, or None."""
        repkv_ms: dict[int | None, float] = {}
        rope_ms: dict[int, float] = {}
        for block in SWEEP_BLOCKS:
            repkv_block = None if memcpy_forward(self.pair, self.shape) else block
            label = f"repkv {'cudaMemcpy' if repkv_block is None else f'k1@{block}'} + rope@{block}"
            seed = block == LLMC_BLOCK
            launch = self.attempt(
                LLMC_SEED if seed else sweep_peer("chain", block),
                LLMC if seed else SWEEP,
                lambda rb=repkv_block, b=block, text=label: (
                    self.chain(self.repkv_k1(rb), self.rope(b)),
                    text,
                ),
                self.chain_op,
            )
            if launch is None:
                continue
            if seed:
                self.launches[LLMC_SEED], self.configs[LLMC_SEED] = launch, label
            if repkv_block not in repkv_ms:
                timing = self.time(self.repkv_k1(repkv_block))
                repkv_ms[repkv_block] = timing.median_ms
                self.row(sweep_peer("repkv k1", repkv_block), SWEEP, timing=timing)
            timing = self.time(self.rope(block))
            rope_ms[block] = timing.median_ms
            self.row(sweep_peer("rope", block), SWEEP, timing=timing)
        if not (repkv_ms and rope_ms):
            return None
        return min(repkv_ms, key=repkv_ms.__getitem__), min(rope_ms, key=rope_ms.__getitem__)

    def rounds(self) -> None:
        """The copy of the fused op's bytes (both methods) and every checked peer, --rounds times,
        each round starting one peer later; each peer's row is its fastest round."""
        nbytes = self.op.bytes_moved(self.shape, self.dtype) // 2
        copies = copy_launchers(nbytes)
        timed: dict[str, Launch] = {f"{COPY}:{m}": copies[m] for m in COPY_METHODS}
        timed.update(self.launches)
        names = list(timed)
        medians: dict[str, list[Any]] = {name: [] for name in names}
        for r in range(self.bench.plan.rounds):
            shift = r % len(names)
            for name in names[shift:] + names[:shift]:
                medians[name].append(self.time(timed[name]))
        method, copy = min(
            ((m, t) for m in COPY_METHODS for t in medians[f"{COPY}:{m}"]), key=lambda mt: mt[1].median_ms
        )
        per_round = zip(*(medians[f"{COPY}:{m}"] for m in COPY_METHODS), strict=True)
        self.row(
            COPY,
            CEILING,
            timing=copy,
            config=f"{method} of {nbytes} B (the faster of {', '.join(COPY_METHODS)})",
            round_ms=tuple(min(t.median_ms for t in both) for both in per_round),
        )
        for name in self.launches:
            best = min(medians[name], key=lambda t: t.median_ms)
            self.row(
                name,
                KINDS.get(name, COMPILED),
                timing=best,
                config=self.configs.get(name, ""),
                round_ms=tuple(t.median_ms for t in medians[name]),
                compile_s=self.compile_s.get(name, math.nan),
            )
            ratio = best.median_ms / copy.median_ms
            self.bench.say(f"  {name}: {best.median_ms:.4f} ms, {ratio:.3f}x the copy")
