"""tuner.runners.timing_stats: the windows of a timed run, and when the CPU was too slow for its hold."""

from __future__ import annotations

import numpy as np
import pytest

from tuner.runners.timing_stats import HEADROOM, Timing, Windows, hold_for


def windows(enqueue_us: float, gpu_us: float) -> Windows:
    return Windows(np.array([0.0066, 0.0060, 0.0064, 0.0170, 0.0065]), enqueue_us, gpu_us)


def test_the_timing_is_the_median_and_p20_p80_of_every_window_with_its_hold() -> None:
    timing = windows(60.0, 200.0).timing(hold_us=150.0)
    assert timing == Timing(
        median_ms=pytest.approx(0.0065),
        p20_ms=pytest.approx(float(np.percentile([0.0066, 0.006, 0.0064, 0.017, 0.0065], 20))),
        p80_ms=pytest.approx(float(np.percentile([0.0066, 0.006, 0.0064, 0.017, 0.0065], 80))),
        reps=5,
        hold_us=150.0,
    )


@pytest.mark.parametrize(
    "enqueue_us,gpu_us,ahead,far_enough",
    [
        (60.0, 200.0, True, True),  # a CuPy launch: the CPU is well ahead
        (100.0, 200.0, True, True),  # exactly 1/HEADROOM of the GPU's time
        (170.0, 203.0, True, False),  # a torch.compile'd call: ahead, but only just
        (250.0, 210.0, False, False),  # behind: the GPU waits for the call
    ],
)
def test_how_far_ahead_the_cpu_was(enqueue_us: float, gpu_us: float, ahead: bool, far_enough: bool) -> None:
    w = windows(enqueue_us, gpu_us)
    assert w.cpu_ahead is ahead
    assert w.far_enough_ahead() is far_enough


def test_the_longer_hold_puts_calls_that_cost_as_much_far_enough_ahead() -> None:
    w = windows(170.0, 203.0)
    hold = hold_for(w, 150.0)
    assert hold == 150.0 + HEADROOM * 170.0
    # the GPU's time per call grows by the extra hold; the CPU's stays
    assert windows(170.0, 203.0 + hold - 150.0).far_enough_ahead()
