"""The chain benchmark's vocabulary and plan (no GPU, no cupy, torch or pandas): the two op
pairs, the benchmark shapes, the peers' names, and what a run measures, counted for --estimate
with the same rules the GPU half follows."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from variants import OPS, DType, Shape
from variants.family import BLOCK_SIZES


@dataclass(frozen=True)
class Pair:
    """llm.c's two-kernel chain and the project's fused op that replaces it."""

    name: str  # "forward" or "backward"
    fused: str  # the fused op (variants.OPS)
    repkv: str  # the repkv op of the chain (its llm.c kernel1 and its tuned configurations)
    backward: bool  # the chain runs rope_backward_inplace first, else repkv_forward first
    chain: str  # llm.c's chain, in launch order

    @property
    def op(self):  # -> variants.Op, the fused op
        return OPS[self.fused]


PAIRS: dict[str, Pair] = {
    "forward": Pair("forward", "rope_repkv_forward", "repkv_forward", False, "repkv_forward + rope_forward"),
    "backward": Pair(
        "backward", "repkv_rope_backward", "repkv_backward", True, "rope_backward_inplace + repkv_backward"
    ),
}

# The seed shape of the issue (Llama 3 8B's head layout, nrep 4) and a few more: the same layout
# at another B*T, multi-query (nrep 48), multi-head (nrep 1), and a small one under 32 MB.
SEED = Shape(B=8, T=1024, NH=32, NH_KV=8, HD=128)
BENCH_SHAPES: tuple[Shape, ...] = (
    SEED,
    Shape(B=2, T=2048, NH=32, NH_KV=8, HD=128),
    Shape(B=4, T=1024, NH=48, NH_KV=1, HD=128),
    Shape(B=4, T=1024, NH=32, NH_KV=32, HD=128),
    Shape(B=1, T=512, NH=32, NH_KV=8, HD=64),
)
QUICK_SHAPES: tuple[Shape, ...] = (SEED,)
QUICK_DTYPES = ("bf16",)
COMPILE_MODES = ("default", "max-autotune-no-cudagraphs")
SWEEP_BLOCKS = BLOCK_SIZES  # the block sizes llm.c's kernels are timed at to find their best
COPY_METHODS = ("memcpy", "kernel")  # tuner.gpu.timing.copy_launchers

# Peers (one row each per pair, shape and dtype) and their kinds.
COPY = "copy"
LLMC_SEED = "llm.c chain k1@128"
LLMC_BEST = "llm.c chain best blocks"
UNFUSED = "best unfused chain"
FUSED = "fused tuned"
CEILING, LLMC, UNFUSED_KIND, FUSED_KIND, COMPILED, SWEEP = (
    "ceiling",
    "llm.c",
    "unfused",
    "fused",
    "torch.compile",
    "sweep",
)
STATUS_OK = "ok"
STATUS_SKIPPED = "skipped"


def new_run_id(label: str, now: float | None = None, pid: int | None = None) -> str:
    """The run's name, as a race names its own: 'chain-h200-20270101T120000-1234' (the GPU
    label, the UTC time it started, the process)."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(time.time() if now is None else now))
    return f"chain-{label}-{stamp}-{os.getpid() if pid is None else pid}"


def compile_peer(mode: str) -> str:
    return f"torch.compile[{mode}]"


def sweep_peer(kernel: str, block: int | None) -> str:
    """A kernel of llm.c's chain timed alone: `repkv k1` or `rope` at a block size (None: the
    cudaMemcpy llm.c's repkv_forward does instead where nrep is 1)."""
    return f"llm.c {kernel}@{block}" if block is not None else f"llm.c {kernel}:cudaMemcpy"


def memcpy_forward(pair: Pair, shape: Shape) -> bool:
    """llm.c's repkv_forward launcher copies with cudaMemcpy instead of its kernel at nrep 1."""
    return not pair.backward and shape.nrep == 1


def repkv_sweep_blocks(pair: Pair, shape: Shape) -> tuple[int | None, ...]:
    return (None,) if memcpy_forward(pair, shape) else SWEEP_BLOCKS


@dataclass(frozen=True)
class Plan:
    pairs: tuple[Pair, ...]
    shapes: tuple[Shape, ...]
    dtypes: tuple[DType, ...]
    modes: tuple[str, ...] = COMPILE_MODES  # torch.compile modes, each a peer
    reps: int = 100  # timed calls per measurement (their median)
    rounds: int = 3  # interleaved rounds of the main peers (each keeps its fastest round median)
    hold_us: float = 150.0
    budget_s: float = 540.0  # torch.compile is skipped past it (rows 'skipped')

    def cases(self) -> list[tuple[Pair, Shape, DType]]:
        return [(pair, shape, dtype) for pair in self.pairs for shape in self.shapes for dtype in self.dtypes]

    def main_peers(self) -> list[str]:
        """The peers timed in every interleaved round (the copy's two methods count as one)."""
        return [COPY, LLMC_SEED, LLMC_BEST, UNFUSED, FUSED, *(compile_peer(m) for m in self.modes)]


@dataclass(frozen=True)
class Counts:
    validations: int  # outputs compared with the float64 reference
    timings: int  # measurements of `reps` timed calls each
    compiles: int  # torch.compile first calls

    def __add__(self, other: Counts) -> Counts:
        return Counts(*(a + b for a, b in zip(self.astuple(), other.astuple(), strict=True)))

    def astuple(self) -> tuple[int, int, int]:
        return (self.validations, self.timings, self.compiles)


def case_counts(plan: Plan, pair: Pair, shape: Shape) -> Counts:
    """What one (pair, shape, dtype) measures: llm.c's chain validated at every sweep block (k1@128
    among them) and each of its kernels timed alone there; then llm.c's chain at the best blocks,
    the best unfused chain, the fused op and each compile mode validated; then `rounds` rounds
    of the copy (both methods), both llm.c chains, the unfused chain, the fused op and each
    compile mode."""
    sweep_timings = len(repkv_sweep_blocks(pair, shape)) + len(SWEEP_BLOCKS)
    validations = len(SWEEP_BLOCKS) + 3 + len(plan.modes)
    per_round = len(COPY_METHODS) + len(plan.main_peers()) - 1
    return Counts(validations, sweep_timings + plan.rounds * per_round, len(plan.modes))


def total_counts(plan: Plan) -> Counts:
    total = Counts(0, 0, 0)
    for pair, shape, _ in plan.cases():
        total = total + case_counts(plan, pair, shape)
    return total


# Seconds assumed on an H200 (guesses, but for the compiles: the peers benchmark's runs,
# docs/runs/h200_peers*.log, mean 0.6-0.9 s default and 1.1-1.6 s max-autotune per compile).
STARTUP_S = 40.0  # imports, two device sessions, CuPy's kernels, the store
FIRST_INDUCTOR_S = 15.0
COMPILE_S = {"default": 1.0, "max-autotune-no-cudagraphs": 1.6}
FLUSH_MS = 0.03  # the L2 flush before each timed call
CALL_CPU_MS = 0.03  # Python per timed call
GBPS = 3000.0  # to guess a kernel's time from its bytes
VALIDATE_S_PER_GB = 0.1  # fresh input, float64 reference, comparison (per GB the op moves)


def estimate_seconds(plan: Plan) -> float:
    """A rough wall time of the run on an H200."""
    seconds = STARTUP_S + (FIRST_INDUCTOR_S if plan.modes else 0.0)
    for pair, shape, dtype in plan.cases():
        counts = case_counts(plan, pair, shape)
        gb = pair.op.bytes_moved(shape, dtype) / 1e9
        call_ms = plan.hold_us / 1e3 + FLUSH_MS + CALL_CPU_MS + 2 * gb / GBPS * 1e3
        seconds += counts.timings * plan.reps * call_ms / 1e3
        seconds += counts.validations * gb * VALIDATE_S_PER_GB
        seconds += sum(COMPILE_S.get(mode, 2.0) for mode in plan.modes)
    return seconds


def describe(plan: Plan) -> str:
    """The plan as --estimate prints it (and every run first)."""
    counts = total_counts(plan)
    cases = plan.cases()
    shapes = "; ".join(str(s) for s in plan.shapes)
    lines = [
        f"chain benchmark: {len(plan.pairs)} pairs ({', '.join(p.name for p in plan.pairs)}) x "
        f"{len(plan.shapes)} shapes x {len(plan.dtypes)} dtypes ({', '.join(d.name for d in plan.dtypes)}) "
        f"= {len(cases)} cases",
        f"  shapes: {shapes}",
        f"  peers per case: {', '.join(plan.main_peers())}, in {plan.rounds} interleaved rounds; llm.c's "
        f"kernels alone at blocks {', '.join(map(str, SWEEP_BLOCKS))}",
        f"  measurements: {counts.timings} timings of {plan.reps} calls each, {counts.validations} "
        f"validations against the float64 reference, {counts.compiles} torch.compile compiles "
        f"({', '.join(plan.modes) or 'none'})",
        f"  estimated wall time on an H200: {estimate_seconds(plan) / 60:.1f} min "
        f"(torch.compile skipped past {plan.budget_s:.0f} s)",
    ]
    return "\n".join(lines)
