"""The held measures: the peers benchmark's event window (flush, hold, events around one call)
of every side, ROUNDS rounds in a rotated order, under each of the run's holds."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tuner.runners.gpu.timing import L2Flusher, time_windows
from tuner.runners.timing_stats import Windows

from .arithmetic import ROUNDS, held_measures, merged


def held_rounds(
    sides: dict[str, Callable[[], Any]], held_flushes: dict[str, L2Flusher], reps: int, rounds: int = ROUNDS
) -> dict[str, dict[str, float]]:
    """Each side's held measures (those of `held_measures`, for each of held_flushes), from
    `rounds` rounds of `reps` windows each; none with no rounds."""
    held_windows: dict[tuple[str, str], list[Windows]] = {}
    for r in range(rounds):  # every side, in a rotated order
        names = list(sides)[r % len(sides) :] + list(sides)[: r % len(sides)]
        for side in names:
            for held, flush in held_flushes.items():
                windows = time_windows(sides[side], flush, reps=reps)
                held_windows.setdefault((held, side), []).append(windows)
    measures: dict[str, dict[str, float]] = {}
    for (held, side), runs in held_windows.items():
        measures.setdefault(side, {}).update(held_measures(held, merged(runs)))
    return measures
