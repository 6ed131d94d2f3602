"""The graph benchmark's arithmetic (no GPU): what one call adds to a graph, the rounds'
medians, the share of slow windows, the held measures of a side's windows, and each side's
measures as multiples of the tuned kernel's."""

from __future__ import annotations

import statistics

import numpy as np

from tuner.runners.timing_stats import Windows

CALLS_PER_GRAPH = 40
REPLAYS = 7  # per round; a graph measure is the median replay of its median round
ROUNDS = 3  # of every graph, and of every side's held windows
GRAPH_MEASURES = ("graph_cold", "graph_warm", "graph_fed")
MEASURES = (*GRAPH_MEASURES, "held", "held_long")
SLOW = 1.25  # a held window over this multiple of its side's median counts as slow
COMPILE_MODES = {"default": "default", "max-autotune": "max-autotune-no-cudagraphs"}


def per_call_us(replay_ms: float, baseline_ms: float, calls: int) -> float:
    """What one call adds to a graph of `calls` calls: (replay - baseline) / calls, in us."""
    return 1000.0 * (replay_ms - baseline_ms) / calls


def slow_share(windows_ms: list[float], factor: float = SLOW) -> float:
    """The share of windows longer than factor x their median."""
    median = statistics.median(windows_ms)
    return sum(w > factor * median for w in windows_ms) / len(windows_ms)


def median_round(rounds: list[list[float]]) -> float:
    """The median of the rounds' medians (one odd round decides nothing)."""
    return statistics.median(statistics.median(r) for r in rounds)


def relative(measures: dict[str, dict[str, float]], base: str = "tuned") -> dict[str, dict[str, float]]:
    """Each side's measures (those of MEASURES it has) as multiples of `base`'s."""
    return {
        side: {
            f"{m}_x_{base}": measure[f"{m}_us"] / measures[base][f"{m}_us"]
            for m in MEASURES
            if f"{m}_us" in measure
        }
        for side, measure in measures.items()
    }


def merged(runs: list[Windows]) -> Windows:
    """Several runs' windows as one run: every window, the mean CPU and GPU time per call."""
    return Windows(
        np.concatenate([r.ms for r in runs]),
        sum(r.enqueue_us for r in runs) / len(runs),
        sum(r.gpu_us for r in runs) / len(runs),
    )


def held_measures(name: str, windows: Windows) -> dict[str, float]:
    """The held measure `name` of one side from its windows, in us."""
    timing = windows.timing()
    return {
        f"{name}_us": 1000 * timing.median_ms,
        f"{name}_p80_us": 1000 * timing.p80_ms,
        f"{name}_slow_share": slow_share(list(windows.ms)),
        f"{name}_enqueue_us": windows.enqueue_us,
        f"{name}_gpu_us_per_call": windows.gpu_us,
    }
