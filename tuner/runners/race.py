"""Racing a shortlist of configurations: which one to keep, given each one's timings.

Pure: the timing is a callable the caller passes (CUDA events on a GPU, fakes in tests), so
the decision is tested without a device. Nothing here imports torch or cupy.

The rule: each candidate's time is the median of its samples. The winner is the earliest
candidate, in shortlist order, whose median is within `margin` of the fastest median
(median <= fastest * (1 + margin)). The shortlist's first candidate is the configuration the
selection rule serves, so it stays unless its median is more than the margin above another's;
exact ties, and differences inside the margin, go to the earlier candidate. A
candidate whose timing raises (or returns no usable sample) is skipped with a warning; when
every one fails, the first candidate is kept.
"""

from __future__ import annotations

import logging
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from variants.errors import RepkvTuneError

log = logging.getLogger(__name__)

# How much faster than an earlier candidate a later one must be to replace it: above the
# run-to-run noise of a median of a few L2-flushed launches.
RACE_MARGIN = 0.01

C = TypeVar("C")


class NoSamples(RepkvTuneError, ValueError):
    """A timing callable returned no finite, non-negative sample."""


@dataclass(frozen=True)
class Timed(Generic[C]):
    """A candidate that was timed: its samples in milliseconds, as the timer returned them."""

    candidate: C
    position: int  # in the shortlist; 0 is the served configuration
    samples: tuple[float, ...]

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples)


@dataclass(frozen=True)
class Failed(Generic[C]):
    """A candidate whose timing raised: skipped by the race."""

    candidate: C
    position: int
    error: Exception


@dataclass(frozen=True)
class RaceResult(Generic[C]):
    winner: C
    winner_position: int  # in the shortlist
    timed: tuple[Timed[C], ...]  # in shortlist order
    failed: tuple[Failed[C], ...]  # in shortlist order
    margin: float

    @property
    def winner_timing(self) -> Timed[C] | None:
        """The winner's timing; None when every candidate failed (the first was kept)."""
        return next((t for t in self.timed if t.position == self.winner_position), None)


def usable_samples(samples: Sequence[float]) -> tuple[float, ...]:
    """The samples as floats; raises NoSamples unless every one is finite and non-negative
    (a broken timer must not crown a candidate)."""
    values = tuple(float(s) for s in samples)
    if not values or not all(math.isfinite(v) and v >= 0 for v in values):
        raise NoSamples(f"unusable samples {values!r}")
    return values


def choose_winner(timed: Sequence[Timed[C]], margin: float = RACE_MARGIN) -> Timed[C]:
    """The earliest timed candidate whose median is within `margin` of the fastest median."""
    if not timed:
        raise ValueError("nothing was timed")
    if margin < 0:
        raise ValueError(f"margin must be >= 0; got {margin}")
    ordered = sorted(timed, key=lambda t: t.position)
    fastest = min(t.median_ms for t in ordered)
    return next(t for t in ordered if t.median_ms <= fastest * (1 + margin))


def run_race(
    candidates: Sequence[C],
    time_candidate: Callable[[C], Sequence[float]],
    margin: float = RACE_MARGIN,
    describe: Callable[[C], str] = str,
    rounds: int = 1,
) -> RaceResult[C]:
    """Time the candidates with `time_candidate` (candidate -> samples in ms) in `rounds`
    interleaved rounds, each round every candidate still in the race once, starting one
    further along the shortlist than the round before, so slow drift of the GPU (clocks,
    temperature) spreads over all of them instead of deciding between neighbours; then choose
    the winner by the rule above, from each candidate's samples of every round. A candidate
    whose timing raises an Exception is skipped with a warning (`describe` names it in the
    log) and loses the samples of its earlier rounds."""
    if not candidates:
        raise ValueError("a race needs at least one candidate")
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1; got {rounds}")
    samples: dict[int, list[float]] = {position: [] for position in range(len(candidates))}
    failed: list[Failed[C]] = []
    for round_ in range(rounds):
        for step in range(len(candidates)):
            position = (round_ + step) % len(candidates)
            if position not in samples:
                continue
            candidate = candidates[position]
            try:
                samples[position].extend(usable_samples(time_candidate(candidate)))
            except Exception as exc:
                log.warning("race: skipping %s: %s: %s", describe(candidate), type(exc).__name__, exc)
                failed.append(Failed(candidate, position, exc))
                del samples[position]
    timed = [Timed(candidates[position], position, tuple(values)) for position, values in samples.items()]
    failed.sort(key=lambda f: f.position)
    position = choose_winner(timed, margin).position if timed else 0
    if not timed:
        log.warning("race: every candidate failed; keeping %s", describe(candidates[0]))
    return RaceResult(
        winner=candidates[position],
        winner_position=position,
        timed=tuple(timed),
        failed=tuple(failed),
        margin=margin,
    )
