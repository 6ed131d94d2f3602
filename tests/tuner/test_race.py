"""The race's decision with fake timings: no GPU, no torch, no cupy."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from tuner.runners.race import RACE_MARGIN, NoSamples, Timed, choose_winner, run_race

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
    with caplog.at_level(logging.WARNING, logger="tuner.runners.race"):
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
    with caplog.at_level(logging.WARNING, logger="tuner.runners.race"):
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
    code = "import sys, tuner.runners.race\nassert 'torch' not in sys.modules and 'cupy' not in sys.modules\n"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_rounds_interleave_the_candidates_starting_one_further_each_round() -> None:
    time_candidate = timer({"a": [1.0], "b": [2.0], "c": [3.0]})
    result = run_race(["a", "b", "c"], time_candidate, rounds=3)
    assert time_candidate.calls == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
    assert [len(t.samples) for t in result.timed] == [3, 3, 3]


def drifting_gpu(base: dict[str, float], drift: float, reps: int):
    """A GPU that runs `drift` slower after every sample: a candidate's samples are its base
    time scaled by the clock at the moment each one is taken."""
    clock = [0]

    def time_candidate(candidate: str) -> list[float]:
        samples = []
        for _ in range(reps):
            samples.append(base[candidate] * (1 + drift * clock[0]))
            clock[0] += 1
        return samples

    return time_candidate


def test_interleaved_rounds_tell_apart_two_configurations_2_percent_apart_under_drift() -> None:
    base = {"served": 1.0, "faster": 0.98}  # 2% apart, the race's margin is 1%
    one_block_each = run_race(["served", "faster"], drifting_gpu(base, 0.001, reps=35))
    assert one_block_each.winner == "served"  # the drift decided: the later block looked slower
    interleaved = run_race(["served", "faster"], drifting_gpu(base, 0.001, reps=1), rounds=35)
    assert interleaved.winner == "faster"


def test_a_candidate_that_fails_in_a_later_round_loses_its_samples() -> None:
    calls = {"b": 0}

    def time_candidate(candidate: str) -> list[float]:
        if candidate == "b":
            calls["b"] += 1
            if calls["b"] == 2:
                raise RuntimeError("launch failed")
            return [0.5]
        return [1.0]

    result = run_race(["a", "b"], time_candidate, rounds=3)
    assert result.winner == "a" and [f.position for f in result.failed] == [1]
    assert [t.candidate for t in result.timed] == ["a"] and len(result.timed[0].samples) == 3
    with pytest.raises(ValueError, match="rounds"):
        run_race(["a"], time_candidate, rounds=0)
