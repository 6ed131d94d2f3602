"""The peers benchmark's plan (what a run measures), its time estimate, and the wall-clock
budget that decides which compiles a run still has time for."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from results.schema import DEFAULT_HOLD_US, L2_COLD
from tuner.peers.names import (
    COPY_PEER,
    DEVICE_CALLS,
    DEVICE_PEERS,
    EMPTY_PEER,
    H2H_ROUNDS,
    TRITON_PEER,
    TUNED_PEER,
    compile_peer,
    eager_peer,
    llmc_peer,
)
from variants import DType, Shape
from variants.family import BLOCK_SIZES


@dataclass(frozen=True)
class Costs:
    """Assumed seconds on an H200 host with cold compile caches (a fresh machine). The compile
    costs are rounded up from the full run of 2026-12-01 (means 0.6 s default, 1.2 s
    max-autotune; maxima 1.9 s and 3.8 s); the others are guesses. The run prints what each
    compile took, and its time budget follows the measured medians once it has them."""

    startup: float = 30.0  # imports, CuPy's own kernels, compiling the CUDA kernels (parallel)
    first_inductor: float = 15.0  # Inductor's first compile in a process (workers, imports)
    compile_default: float = 1.0  # one shape, one formulation, mode "default"
    compile_max_autotune: float = 1.5  # coordinate-descent tuning compiles and times configs
    device_time_pair: float = 1.5  # the profiled pass of one pair: rebuilds, checks, the trace
    triton_compile: float = 0.35  # one Triton kernel compile (per dtype, HD, nrep and config)
    triton_bench: float = 0.06  # the autotuner timing one config
    validate_per_gb: float = 0.05  # fresh input + float64 reference + comparison
    overhead_per_call_ms: float = 0.05  # the L2 flush before each timed call (plus the hold)
    gpu_gbps: float = 3000.0  # to guess kernel times from bytes


@dataclass
class Plan:
    shapes: list[Shape]
    dtypes: list[DType]
    groups: list[str]  # of PEER_GROUPS
    eager: Sequence[str]
    compiled: Sequence[str]
    max_autotune: Sequence[str]  # formulations compiled in max-autotune mode, in this order
    triton_configs: int
    reps: int = 100
    hold_us: float = DEFAULT_HOLD_US
    l2: str = L2_COLD  # what L2 holds at each timed call: flushed, or flushed and dout written
    budget_s: float = 450.0
    head_to_head: bool = True
    device_time: bool = True

    @property
    def pairs(self) -> list[tuple[Shape, DType]]:
        return [(shape, dtype) for shape in self.shapes for dtype in self.dtypes]

    def peers_per_pair(self) -> list[str]:
        """The peers measured for every shape and dtype, before the max-autotune pass."""
        peers = [COPY_PEER, EMPTY_PEER, TUNED_PEER]
        if "llmc" in self.groups:
            peers += [llmc_peer(b) for b in BLOCK_SIZES]
        if "eager" in self.groups:
            peers += [eager_peer(f) for f in self.eager]
        if "triton" in self.groups:
            peers.append(TRITON_PEER)
        if "compile" in self.groups:
            peers += [compile_peer("default", f) for f in self.compiled]
        return peers

    def max_autotune_peers(self) -> list[str]:
        if "max-autotune" not in self.groups:
            return []
        return [compile_peer("max-autotune-no-cudagraphs", f) for f in self.max_autotune]


@dataclass
class Estimate:
    parts: dict[str, float] = field(default_factory=dict)
    max_autotune_total: int = 0
    max_autotune_fit: int = 0  # how many the budget leaves room for

    @property
    def total(self) -> float:
        return sum(self.parts.values())


def triton_layouts(pairs: Iterable[tuple[Shape, DType]]) -> int:
    """Distinct Triton compilations per config: one per (dtype, HD, nrep)."""
    return len({(dtype.name, shape.HD, shape.nrep) for shape, dtype in pairs})


def estimate(plan: Plan, costs: Costs = Costs()) -> Estimate:
    """Seconds each part of the run is expected to take (see Costs), and how many max-autotune
    compiles fit in the budget after everything else."""
    pairs = plan.pairs
    result = Estimate()
    result.parts["startup"] = costs.startup
    timed = validated = 0.0
    for shape, dtype in pairs:
        gb = shape.bytes_moved(dtype) / 1e9
        kernel_ms = 1e3 * gb / costs.gpu_gbps
        guesses = {COPY_PEER: 3 * kernel_ms, EMPTY_PEER: 0.0, TUNED_PEER: kernel_ms}
        for peer in plan.peers_per_pair():
            if peer.startswith("llm.c"):
                guesses[peer] = 5 * kernel_ms
            elif peer not in guesses:
                guesses[peer] = 2 * kernel_ms
        for peer, ms in guesses.items():
            timed += plan.reps * (ms + costs.overhead_per_call_ms + plan.hold_us / 1e3) / 1e3
            if peer not in (COPY_PEER, EMPTY_PEER):
                validated += costs.validate_per_gb * gb
    result.parts["timing"] = timed
    result.parts["validation"] = validated
    if plan.head_to_head:
        # per pair, both sides rebuilt (a compile at most) and validated, then timed in rounds
        h2h = 0.0
        for shape, dtype in pairs:
            gb = shape.bytes_moved(dtype) / 1e9
            per_call_ms = 1e3 * gb / costs.gpu_gbps + costs.overhead_per_call_ms + plan.hold_us / 1e3
            h2h += costs.compile_default + 2 * costs.validate_per_gb * gb
            h2h += 2 * H2H_ROUNDS * plan.reps * per_call_ms / 1e3
        result.parts["head to head"] = h2h
    if plan.device_time:
        result.parts["device time"] = costs.device_time_pair * len(pairs)
    if "triton" in plan.groups:
        result.parts["triton"] = plan.triton_configs * (
            costs.triton_compile * triton_layouts(pairs) + costs.triton_bench * len(pairs)
        )
    compiled = len(plan.compiled) * len(pairs) if "compile" in plan.groups else 0
    result.max_autotune_total = len(plan.max_autotune_peers()) * len(pairs)
    if compiled or result.max_autotune_total:
        result.parts["inductor first compile"] = costs.first_inductor
    if compiled:
        result.parts["compile default"] = compiled * costs.compile_default
    spare = plan.budget_s - result.total if plan.budget_s > 0 else math.inf
    fit = result.max_autotune_total
    if spare < math.inf:
        fit = max(0, min(fit, int(spare // costs.compile_max_autotune)))
    result.max_autotune_fit = fit
    if fit:
        result.parts["compile max-autotune"] = fit * costs.compile_max_autotune
    return result


def describe(plan: Plan, est: Estimate, costs: Costs = Costs()) -> str:
    shapes = ", ".join(f"{s.key} ({s.bytes_moved(plan.dtypes[0]) / 1e6:.0f} MB)" for s in plan.shapes)
    lines = [
        f"plan: {len(plan.shapes)} shapes x {len(plan.dtypes)} dtypes "
        f"({','.join(d.name for d in plan.dtypes)}) = {len(plan.pairs)} pairs; MB in {plan.dtypes[0].name}: "
        + shapes,
        f"peers per pair ({len(plan.peers_per_pair())}): " + ", ".join(plan.peers_per_pair()),
    ]
    if est.max_autotune_total:
        lines.append(
            f"then max-autotune ({', '.join(plan.max_autotune_peers())}): {est.max_autotune_total} "
            "compiles, the pairs where the fastest peer is closest to the tuned kernel first, "
            "while the time budget lasts"
        )
    if plan.head_to_head:
        lines.append(
            f"then head to head: the tuned kernel and each pair's fastest peer, rebuilt and validated "
            f"again, timed in {H2H_ROUNDS} interleaved rounds of {plan.reps} calls (each its median round)"
        )
    if plan.device_time:
        lines.append(
            f"then device time: each pair's copy, empty launch, tuned kernel and {DEVICE_PEERS} fastest "
            f"peers, {DEVICE_CALLS} calls each under the profiler (their kernels' own GPU time)"
        )
    parts = ", ".join(f"{name} {seconds:.0f}s" for name, seconds in est.parts.items())
    budget = f"{plan.budget_s:.0f}s" if plan.budget_s > 0 else "none"
    lines.append(f"estimate: {est.total:.0f}s ({est.total / 60:.1f} min): {parts}; budget {budget}")
    if est.max_autotune_total:
        lines.append(
            f"estimate: about {est.max_autotune_fit} of {est.max_autotune_total} max-autotune compiles "
            f"fit (assumed {costs.compile_max_autotune:.1f}s each, default mode "
            f"{costs.compile_default:.1f}s, a Triton compile {costs.triton_compile:.2f}s)"
        )
    return "\n".join(lines)


class Budget:
    """Wall-clock budget of the run. Compiles (Inductor, Triton) are skipped once the time
    left would not cover what one is expected to cost; measurements of compiled-ahead kernels
    always run. Expected costs start from Costs and follow the measured median."""

    def __init__(
        self,
        seconds: float,
        start: float,
        costs: Costs = Costs(),
        triton_configs: int = 1,
        reserve_s: float = 15.0,
    ):
        self.seconds = seconds
        self.start = start
        self.reserve_s = reserve_s
        self.assumed = {
            "compile default": costs.compile_default,
            "compile max-autotune": costs.compile_max_autotune,
            "triton": triton_configs * (costs.triton_compile + costs.triton_bench),
        }
        self.spent: dict[str, list[float]] = {}

    def expected(self, what: str) -> float:
        """The median of what it took so far (the first compile in a process also starts
        Inductor's workers: a mean would carry that), else the assumed cost."""
        seen = sorted(self.spent.get(what, ()))
        if not seen:
            return self.assumed.get(what, 0.0)
        mid = len(seen) // 2
        return seen[mid] if len(seen) % 2 else (seen[mid - 1] + seen[mid]) / 2

    def record(self, what: str, seconds: float) -> None:
        self.spent.setdefault(what, []).append(seconds)

    def allows(self, what: str, now: float) -> bool:
        if self.seconds <= 0:
            return True
        return (now - self.start) + self.expected(what) + self.reserve_s <= self.seconds
