"""What a timed run of calls gives: every call's event window, and their median and p20/p80.
NumPy only, so that scripts and tests read them without a GPU."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# A held call's window is the GPU's alone when the CPU enqueues calls well ahead of the GPU. On
# the H200 a torch.compile'd call took 100-210 us of CPU to issue against about 200 us of GPU per
# call (flush, 150 us hold, call), and its windows ran up to 4% short of those under a 1000 us
# hold (docs/runs/h200_graph_probe.log): so the CPU must enqueue a call in at most
# 1/HEADROOM of the GPU's time per call, or the calls are timed again with a longer hold.
HEADROOM = 2.0


@dataclass(frozen=True)
class Timing:
    median_ms: float
    p20_ms: float
    p80_ms: float
    reps: int
    hold_us: float = 0.0  # the GPU-side wait after each flush these calls were timed with


@dataclass(frozen=True)
class Windows:
    """Every call's event window, and what the CPU spent enqueueing them."""

    ms: np.ndarray  # one CUDA-event window per call, in call order
    enqueue_us: float  # CPU time per call to enqueue flush, events and call
    gpu_us: float  # GPU time per call from the first window's start to the last one's end

    @property
    def cpu_ahead(self) -> bool:
        """Whether the CPU enqueued as fast as the GPU ran, so every call was queued in time."""
        return self.far_enough_ahead(headroom=1.0)

    def far_enough_ahead(self, headroom: float = HEADROOM) -> bool:
        """Whether the CPU enqueued a call in at most 1/headroom of the GPU's time per call."""
        return self.enqueue_us * headroom <= self.gpu_us

    def timing(self, hold_us: float = 0.0) -> Timing:
        p20, median, p80 = np.percentile(self.ms, [20, 50, 80])
        return Timing(float(median), float(p20), float(p80), len(self.ms), hold_us)


def hold_for(windows: Windows, hold_us: float, headroom: float = HEADROOM) -> float:
    """A hold under which the CPU stays far enough ahead of calls that cost it what these did:
    each call's GPU time grows by headroom x the CPU's time to enqueue one."""
    return hold_us + headroom * windows.enqueue_us
