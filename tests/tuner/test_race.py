"""The race's decision with fake timings: no GPU, no torch, no cupy."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from tuner.race import RACE_MARGIN, NoSamples, Timed, choose_winner, run_race

ROOT = Path(__file__).resolve().parents[2]


def timer(times: dict[str, list[float] | Exception]):
    """A timing callable from a table: candidate -> samples, or the exception to raise."""
    calls: list[str] = []

    def time_candidate(candidate: str) -> list[float]:
        calls.append(candidate)
        found = times[candidate]
        if isinstance(found, Exception):
            raise found
        return found

    time_candidate.calls = calls  # type: ignore[attr-defined]
    return time_candidate


def test_the_fastest_median_wins_and_every_candidate_is_timed_in_order() -> None:
    time_candidate = timer({"a": [1.0, 1.0, 9.0], "b": [0.5, 0.6, 0.4], "c": [0.8, 0.8, 0.8]})
    result = run_race(["a", "b", "c"], time_candidate)
    assert result.winner == "b" and result.winner_position == 1
    assert time_candidate.calls == ["a", "b", "c"]
    assert [(t.candidate, t.median_ms) for t in result.timed] == [("a", 1.0), ("b", 0.5), ("c", 0.8)]
    assert result.winner_timing is not None and result.winner_timing.median_ms == 0.5
    assert not result.failed


def test_the_median_not_the_mean_decides() -> None:
    # a's mean is 4.0 (one outlier), its median 1.0; b's mean and median are 1.5
    result = run_race(["a", "b"], timer({"a": [1.0, 1.0, 10.0], "b": [1.5, 1.5, 1.5]}))
    assert result.winner == "a"


def test_the_served_candidate_stays_unless_beaten_by_more_than_the_margin() -> None:
    inside = 1.0 / (1 + RACE_MARGIN) + 1e-6  # a is within the margin of b
    result = run_race(["a", "b"], timer({"a": [1.0], "b": [inside]}))
    assert result.winner == "a"
    outside = 1.0 / (1 + RACE_MARGIN) - 1e-6  # b beats a by more than the margin
    result = run_race(["a", "b"], timer({"a": [1.0], "b": [outside]}))
    assert result.winner == "b"


def test_the_margin_is_a_parameter() -> None:
    times = {"a": [1.0], "b": [0.9]}
    assert run_race(["a", "b"], timer(times), margin=0.2).winner == "a"
    assert run_race(["a", "b"], timer(times), margin=0.0).winner == "b"
    with pytest.raises(ValueError, match="margin"):
        run_race(["a", "b"], timer(times), margin=-0.1)


def test_ties_go_to_the_earlier_candidate() -> None:
    assert run_race(["a", "b", "c"], timer({"a": [2.0], "b": [1.0], "c": [1.0]})).winner == "b"
    assert run_race(["c", "b", "a"], timer({"a": [2.0], "b": [1.0], "c": [1.0]})).winner == "c"
    # within the margin of the fastest, the earliest wins even if it is not the first
    near = {"a": [2.0], "b": [1.005], "c": [1.0]}
    assert run_race(["a", "b", "c"], timer(near)).winner == "b"


def test_a_failing_candidate_is_skipped_with_a_warning(caplog) -> None:
    times = {"a": RuntimeError("too many resources requested"), "b": [2.0], "c": [1.0]}
    with caplog.at_level(logging.WARNING, logger="tuner.race"):
        result = run_race(["a", "b", "c"], timer(times))
    assert result.winner == "c"
    assert [t.candidate for t in result.timed] == ["b", "c"]
    assert [(f.candidate, f.position, str(f.error)) for f in result.failed] == [
        ("a", 0, "too many resources requested")
    ]
    assert "skipping a" in caplog.text and "too many resources requested" in caplog.text


def test_unusable_samples_count_as_a_failure() -> None:
    times = {"a": [], "b": [float("nan"), 1.0], "c": [-1.0], "d": [float("inf")], "e": [3.0]}
    result = run_race(list(times), timer(times))
    assert result.winner == "e"
    assert [f.candidate for f in result.failed] == ["a", "b", "c", "d"]
    assert all(isinstance(f.error, NoSamples) for f in result.failed)


def test_when_every_candidate_fails_the_first_is_kept(caplog) -> None:
    times = {"a": RuntimeError("x"), "b": ValueError("y")}
    with caplog.at_level(logging.WARNING, logger="tuner.race"):
        result = run_race(["a", "b"], timer(times), describe=str.upper)
    assert result.winner == "a" and result.winner_position == 0
    assert not result.timed and result.winner_timing is None
    assert "every candidate failed; keeping A" in caplog.text


def test_a_single_candidate_is_its_own_winner() -> None:
    assert run_race(["a"], timer({"a": [1.0]})).winner == "a"


def test_an_empty_race_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least one"):
        run_race([], timer({}))


def test_exceptions_that_are_not_errors_are_not_swallowed() -> None:
    def interrupted(candidate: str) -> list[float]:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_race(["a"], interrupted)


def test_choose_winner_orders_by_position_not_by_the_order_given() -> None:
    timed = [Timed("late", 2, (1.0,)), Timed("early", 0, (1.0,))]
    assert choose_winner(timed).candidate == "early"
    with pytest.raises(ValueError):
        choose_winner([])


def test_the_module_imports_neither_torch_nor_cupy() -> None:
    code = "import sys, tuner.race\nassert 'torch' not in sys.modules and 'cupy' not in sys.modules\n"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
