"""The peers benchmark's plan, time estimate, rows and tables: everything of
`scripts/bench_kernels.py` that needs no GPU (no cupy, torch or triton here), so it is tested
on any machine.

A row is one (shape, dtype, peer): its status, median time with p20/p80, and the ratios derived
in `derive` (to the same-run device copy, achieved GB/s and the fraction of the GPU's peak,
to an empty kernel launch). `summary` turns the rows into one line per shape and dtype, and
`markdown` draws any of these frames as a table.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from results.schema import DEFAULT_HOLD_US, L2_COLD
from tuner.presets import DEFAULT_SHAPES, MODELS
from variants import DType, Shape
from variants.family import BLOCK_SIZES

# Shapes of 8-32 MB in every dtype, where a launch's fixed cost shows (bytes_moved, fp32: about
# 19, 21 and 31 MB; half that in bf16 and fp16).
SMALL_SHAPES: tuple[Shape, ...] = (
    MODELS["llama3.2-1b"].shape(1, 512),
    MODELS["gemma2-2b"].shape(1, 512),
    MODELS["qwen2.5-0.5b"].shape(1, 2048),
)
BENCH_SHAPES: tuple[Shape, ...] = DEFAULT_SHAPES + SMALL_SHAPES
QUICK_SHAPES: tuple[Shape, ...] = (MODELS["llama3.2-1b"].shape(1, 512), MODELS["llama3-8b"].shape(8, 1024))
QUICK_DTYPES = ("bf16",)

# Peer groups a run can select (--peers); the copy, the empty launch and the tuned kernel
# are always measured.
PEER_GROUPS = ("llmc", "eager", "compile", "max-autotune", "triton")

# Kinds of row; the fastest peer is the fastest ok row among PEER_KINDS.
CEILING, LAUNCH, TUNED = "ceiling", "launch", "tuned"
LLMC, EAGER, COMPILED, TRITON = "llm.c", "torch eager", "torch.compile", "triton"
PEER_KINDS = (LLMC, EAGER, COMPILED, TRITON)
# The last pass: the tuned kernel and the pair's fastest peer again, in interleaved rounds.
HEAD_TO_HEAD = "head to head"
H2H_ROUNDS = 5
H2H_PREFIX = "h2h:"
# The device-time pass (tuner.kernel_trace): per pair, the copy, the empty launch, the tuned
# kernel and the DEVICE_PEERS fastest peers, DEVICE_CALLS profiled calls each.
DEVICE_PEERS = 4
DEVICE_CALLS = 40

COPY_PEER = "copy"
EMPTY_PEER = "empty_launch"
TUNED_PEER = "tuned"
TRITON_PEER = "triton:autotune"
LLMC_SEED_BLOCK = 128

STATUS_OK = "ok"
STATUS_SKIPPED = "skipped"


def llmc_peer(block: int) -> str:
    return f"llm.c k1@{block}"


def eager_peer(formulation: str) -> str:
    return f"eager:{formulation}"


def compile_peer(mode: str, formulation: str) -> str:
    short = "max-autotune" if mode.startswith("max-autotune") else mode
    return f"compile[{short}]:{formulation}"


def head_to_head_peer(peer: str) -> str:
    return f"{H2H_PREFIX}{peer}"


LLMC_SEED = llmc_peer(LLMC_SEED_BLOCK)


# --- the plan and its time estimate ------------------------------------------------------------


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


# --- rows ---------------------------------------------------------------------------------------

ROW_COLUMNS = (
    "shape",
    "B",
    "T",
    "NH",
    "NH_KV",
    "HD",
    "dtype",
    "MB",
    "peer",
    "kind",
    "config",
    "status",
    "message",
    "time_ms",
    "p20_ms",
    "p80_ms",
    "reps",
    "compile_s",
    "graphs",
    "kernels",
    "match",
    "tuned_from",
    "ratio_to_copy",
    "gbps",
    "frac_peak",
    "ratio_to_empty",
    "device_us",
    "device_p20_us",
    "device_p80_us",
    "device_kernels",
)


def make_row(
    shape: Shape,
    dtype: DType,
    peer: str,
    kind: str,
    status: str = STATUS_OK,
    message: str = "",
    time_ms: float | None = None,
    p20_ms: float | None = None,
    p80_ms: float | None = None,
    reps: int | None = None,
    config: str = "",
    **extra: Any,
) -> dict[str, Any]:
    """One (shape, dtype, peer) row; a failed or skipped peer has no times."""
    ok = status == STATUS_OK
    nan = float("nan")
    row: dict[str, Any] = {
        "shape": shape.key,
        **shape.as_dict(),
        "dtype": dtype.name,
        "MB": shape.bytes_moved(dtype) / 1e6,
        "peer": peer,
        "kind": kind,
        "config": config,
        "status": status,
        "message": message,
        "time_ms": float(time_ms) if ok and time_ms is not None else nan,
        "p20_ms": float(p20_ms) if ok and p20_ms is not None else nan,
        "p80_ms": float(p80_ms) if ok and p80_ms is not None else nan,
        "reps": int(reps) if ok and reps is not None else 0,
        "compile_s": nan,
        "graphs": -1,
        "kernels": -1,
        "match": "",  # tuned rows: exact or nearest
        "tuned_from": "",  # tuned rows: the tuned shape and dtype the configuration comes from
        # the device-time pass (tuner.kernel_trace), where it profiled this peer
        "device_us": nan,
        "device_p20_us": nan,
        "device_p80_us": nan,
        "device_kernels": -1,
    }
    row.update(extra)
    return row


def derive(frame: pd.DataFrame, peak_gbps: float | None) -> pd.DataFrame:
    """Add, per row: ratio_to_copy (time over the same shape and dtype's copy), gbps (bytes
    moved over time), frac_peak (gbps over the peak; NaN when unknown) and ratio_to_empty
    (time over the same pair's empty kernel launch)."""
    frame = frame.copy()
    keys = ["shape", "dtype"]

    def reference_time(peer: str) -> pd.Series:
        ref = frame[(frame["peer"] == peer) & (frame["status"] == STATUS_OK)][[*keys, "time_ms"]]
        ref = ref.drop_duplicates(keys).rename(columns={"time_ms": "_ref"})
        return frame[keys].merge(ref, on=keys, how="left")["_ref"].to_numpy()

    time_ms = frame["time_ms"].astype(float)
    frame["ratio_to_copy"] = time_ms / reference_time(COPY_PEER)
    frame["gbps"] = frame["MB"].astype(float) / time_ms  # MB per ms = GB/s
    frame["frac_peak"] = frame["gbps"] / peak_gbps if peak_gbps else float("nan")
    frame["ratio_to_empty"] = time_ms / reference_time(EMPTY_PEER)
    return frame


# --- the summary: one line per shape and dtype --------------------------------------------------


def _ok(group: pd.DataFrame) -> pd.DataFrame:
    return group[(group["status"] == STATUS_OK) & group["time_ms"].notna()]


def _time(group: pd.DataFrame, peer: str) -> float:
    hit = _ok(group)[_ok(group)["peer"] == peer]
    return float(hit["time_ms"].iloc[0]) if len(hit) else float("nan")


def _device_us(group: pd.DataFrame, peer: str) -> float:
    hit = group[(group["peer"] == peer) & group["device_us"].notna()]
    return float(hit["device_us"].iloc[0]) if len(hit) else float("nan")


def device_summary(group: pd.DataFrame) -> dict[str, Any]:
    """One pair's device times (the profiled pass; NaN where it did not run): the tuned kernel,
    the copy, the empty launch, and the profiled peer whose own work took least."""
    nan = float("nan")
    if "device_us" not in group:
        group = group.assign(device_us=nan, device_kernels=-1)
    tuned_us, copy_us, empty_us = (_device_us(group, p) for p in (TUNED_PEER, COPY_PEER, EMPTY_PEER))
    peers = group[group["kind"].isin(PEER_KINDS) & group["device_us"].notna()]
    best = peers.loc[peers["device_us"].idxmin()] if len(peers) else None
    return {
        "tuned_device_us": tuned_us,
        "copy_device_us": copy_us,
        "empty_device_us": empty_us,
        "tuned_device_x_copy": tuned_us / copy_us,
        "device_peer": str(best["peer"]) if best is not None else "",
        "device_peer_us": float(best["device_us"]) if best is not None else nan,
        "device_peer_kernels": int(best["device_kernels"]) if best is not None else -1,
        "device_vs_peer": float(best["device_us"]) / tuned_us if best is not None else nan,
    }


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Per shape and dtype (in the rows' order): the copy, the empty launch, the tuned kernel
    (time, x copy, GB/s), the fastest peer of PEER_KINDS, llm.c's kernel1 at block 128 and at
    its best block, and the speed-ups of the tuned kernel over each (peer time / tuned time:
    above 1 the tuned kernel is faster); where the run ended head to head, that race's ratio
    (h2h_vs_peer) too, and where it profiled the pair, the device times (`device_summary`)."""
    out = []
    for (shape, dtype), group in frame.groupby(["shape", "dtype"], sort=False):
        copy_ms, empty_ms, tuned_ms = (_time(group, p) for p in (COPY_PEER, EMPTY_PEER, TUNED_PEER))
        tuned = group[group["peer"] == TUNED_PEER]
        peers = _ok(group)[_ok(group)["kind"].isin(PEER_KINDS)]
        best = peers.loc[peers["time_ms"].idxmin()] if len(peers) else None
        llmc = peers[peers["kind"] == LLMC]
        llmc_best = llmc.loc[llmc["time_ms"].idxmin()] if len(llmc) else None
        seed_ms = _time(group, LLMC_SEED)
        h2h = _ok(group)[_ok(group)["kind"] == HEAD_TO_HEAD]
        h2h_tuned_ms = _time(group, head_to_head_peer(TUNED_PEER))
        h2h_peer = h2h[h2h["peer"] != head_to_head_peer(TUNED_PEER)]
        h2h_peer_ms = float(h2h_peer["time_ms"].iloc[0]) if len(h2h_peer) else float("nan")
        failed = group[~group["status"].isin([STATUS_OK, STATUS_SKIPPED])]
        failures = zip(failed["peer"], failed["status"], strict=True)
        skipped = group[group["status"] == STATUS_SKIPPED]
        mb = float(group["MB"].iloc[0])
        out.append(
            {
                "shape": shape,
                "dtype": dtype,
                "MB": mb,
                "copy_ms": copy_ms,
                "copy_gbps": mb / copy_ms,
                "empty_ms": empty_ms,
                "copy_x_empty": copy_ms / empty_ms,
                "tuned_ms": tuned_ms,
                "tuned_match": str(tuned["match"].iloc[0]) if len(tuned) else "",
                "tuned_config": str(tuned["config"].iloc[0]) if len(tuned) else "",
                "tuned_x_copy": tuned_ms / copy_ms,
                "tuned_gbps": mb / tuned_ms,
                "tuned_frac_peak": float(tuned["frac_peak"].iloc[0])
                if "frac_peak" in tuned and len(tuned)
                else float("nan"),
                "tuned_x_empty": tuned_ms / empty_ms,
                "fastest_peer": best["peer"] if best is not None else "",
                "fastest_peer_ms": float(best["time_ms"]) if best is not None else float("nan"),
                "vs_fastest_peer": (float(best["time_ms"]) / tuned_ms) if best is not None else float("nan"),
                "h2h_peer": str(h2h_peer["peer"].iloc[0]).removeprefix(H2H_PREFIX) if len(h2h_peer) else "",
                "h2h_tuned_ms": h2h_tuned_ms,
                "h2h_peer_ms": h2h_peer_ms,
                "h2h_vs_peer": h2h_peer_ms / h2h_tuned_ms,
                "llmc_seed_ms": seed_ms,
                "vs_llmc_seed": seed_ms / tuned_ms,
                "llmc_best_block": int(str(llmc_best["peer"]).rsplit("@", 1)[1])
                if llmc_best is not None
                else 0,
                "llmc_best_ms": float(llmc_best["time_ms"]) if llmc_best is not None else float("nan"),
                "vs_llmc_best": (float(llmc_best["time_ms"]) / tuned_ms)
                if llmc_best is not None
                else float("nan"),
                "failed": ", ".join(f"{peer} ({status})" for peer, status in failures),
                "skipped": len(skipped),
                "not_timed": len(failed) + len(skipped),
                **device_summary(_ok(group)),
            }
        )
    return pd.DataFrame(out)


# --- tables ---------------------------------------------------------------------------------------


def fmt(value: Any, spec: str = ".4g") -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return "" if math.isnan(value) else format(value, spec)
    return str(value)


def markdown(frame: pd.DataFrame, columns: Mapping[str, tuple[str, str]]) -> str:
    """A markdown table of frame: columns maps a column to (header, format spec; "" for text,
    "x" for a ratio drawn as 1.23x, "%" for a fraction drawn as 45.6%)."""
    headers = [header for header, _ in columns.values()]
    numeric = [spec not in ("",) for _, spec in columns.values()]
    lines = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("--:" if n else "---" for n in numeric) + "|",
    ]
    for _, row in frame.iterrows():
        cells = []
        for name, (_, spec) in columns.items():
            value = row.get(name)
            if spec == "x":
                text = fmt(value, ".2f")
                cells.append(text + "x" if text else "")
            elif spec == "%":
                text = fmt(value * 100 if isinstance(value, float) else value, ".1f")
                cells.append(text + "%" if text else "")
            else:
                cells.append(fmt(value, spec) if spec else fmt(value))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


BANDWIDTH_COLUMNS: dict[str, tuple[str, str]] = {
    "shape": ("shape", ""),
    "dtype": ("dtype", ""),
    "MB": ("MB", ".1f"),
    "copy_ms": ("copy ms", ".4f"),
    "copy_gbps": ("copy GB/s", ".0f"),
    "empty_ms": ("empty launch ms", ".4f"),
    "copy_x_empty": ("copy / empty", "x"),
    "tuned_gbps": ("tuned GB/s", ".0f"),
    "tuned_frac_peak": ("tuned % of peak", "%"),
    "tuned_x_empty": ("tuned / empty", "x"),
    "tuned_x_copy": ("tuned / copy", "x"),
}

MAIN_COLUMNS: dict[str, tuple[str, str]] = {
    "shape": ("shape", ""),
    "dtype": ("dtype", ""),
    "MB": ("MB", ".1f"),
    "tuned_ms": ("tuned ms", ".4f"),
    "tuned_x_copy": ("x copy", ".3f"),
    "fastest_peer": ("fastest peer", ""),
    "fastest_peer_ms": ("peer ms", ".4f"),
    "vs_fastest_peer": ("tuned vs peer", "x"),
    "h2h_vs_peer": ("head to head", "x"),
    "vs_llmc_seed": ("vs llm.c k1@128", "x"),
    "llmc_best_block": ("k1 best block", ""),
    "vs_llmc_best": ("vs k1 best", "x"),
    "not_timed": ("not timed", ".0f"),
}


DEVICE_COLUMNS: dict[str, tuple[str, str]] = {
    "shape": ("shape", ""),
    "dtype": ("dtype", ""),
    "MB": ("MB", ".1f"),
    "tuned_device_us": ("tuned us", ".2f"),
    "copy_device_us": ("copy us", ".2f"),
    "tuned_device_x_copy": ("x copy", ".3f"),
    "empty_device_us": ("empty us", ".2f"),
    "device_peer": ("fastest profiled peer", ""),
    "device_peer_us": ("peer us", ".2f"),
    "device_peer_kernels": ("its kernels", ".0f"),
    "device_vs_peer": ("tuned vs peer", "x"),
}


def render(summary_frame: pd.DataFrame) -> str:
    """The tables the run prints last: bandwidth and fixed costs, then the comparison ("head
    to head": the fastest peer's time over the tuned kernel's when the two were timed again in
    interleaved rounds; "not timed": rows of the pair that failed or were skipped, listed in
    the log and the parquet), then, where the run profiled, the device times."""
    frame = summary_frame.copy()
    nearest = frame["tuned_match"] == "nearest"
    frame["shape"] = frame["shape"].str.replace(r"[A-Z_]+=", "", regex=True)
    frame.loc[nearest, "dtype"] = frame.loc[nearest, "dtype"] + " (nearest)"
    text = "\n\n".join(
        [
            "Bandwidth and fixed costs (GB/s = bytes moved / time; empty = an empty kernel launch):",
            markdown(frame, BANDWIDTH_COLUMNS),
            "Tuned kernel against its peers (ratios are peer time / tuned time: above 1 the tuned "
            "kernel is faster; head to head: the same two timed again in interleaved rounds; "
            "shape = B,T,NH,NH_KV,HD):",
            markdown(frame, MAIN_COLUMNS),
        ]
    )
    profiled = frame[frame["tuned_device_us"].notna()]
    if len(profiled):
        text += "\n\n" + "\n\n".join(
            [
                f"Device time per call (the profiler's kernel and copy durations, launch latency "
                f"excluded; median of {DEVICE_CALLS} flushed calls; peers: the {DEVICE_PEERS} "
                "fastest by event time, the fastest of them here by device time):",
                markdown(profiled, DEVICE_COLUMNS),
            ]
        )
    return text
