"""Device time from a profiler trace (tuner.runners.kernel_trace) on made-up chrome-trace events: calls
cut at their markers, the flush's kernels outside the brackets, copies counted as work, and a
trace that does not add up refused."""

from __future__ import annotations

import pytest

from tuner.runners.kernel_trace import BEGIN_MARKER, END_MARKER, device_times, split_calls


class Trace:
    """Builds events as the profiling pass lays them out: flush, hold, begin, work, end."""

    def __init__(self) -> None:
        self.events: list[dict] = []
        self.now = 0.0

    def add(self, name: str, dur: float, cat: str = "kernel") -> None:
        self.events.append({"cat": cat, "name": name, "ts": self.now, "dur": dur})
        self.now += dur + 1.0

    def call(self, *work: tuple[str, float] | tuple[str, float, str]) -> None:
        self.add("cub::DeviceReduceKernel", 19.0)
        self.add("cupy_copy", 1.0)
        self.add("hold_ns", 150.0)
        self.add(BEGIN_MARKER, 0.5)
        for item in work:
            self.add(*item)
        self.add(END_MARKER, 0.5)


def test_each_sides_calls_sum_their_own_work_outside_the_flush() -> None:
    trace = Trace()
    for dur in (3.5, 3.4, 3.6):
        trace.call(("repkv_tile<...>", dur))
    for dur in (2.0, 2.2, 2.1):  # a peer of two kernels: its time is their sum
        trace.call(("triton_poi_fused_cat", dur), ("triton_poi_fused_sum", 1.0))
    for dur in (4.0, 4.1, 4.2):  # the copy is a memcpy, not a kernel
        trace.call(("Memcpy DtoD (Device -> Device)", dur, "gpu_memcpy"))
    trace.events.append({"cat": "cpu_op", "name": "aten::empty", "ts": 5.0, "dur": 99.0})  # host side
    times = device_times(trace.events, ["tuned", "peer", "copy"], 3)
    assert times["tuned"].median_us == pytest.approx(3.5) and times["tuned"].kernels == 1
    assert times["peer"].median_us == pytest.approx(3.1) and times["peer"].kernels == 2
    assert times["copy"].median_us == pytest.approx(4.1) and times["copy"].kernels == 1
    assert times["tuned"].p20_us <= times["tuned"].median_us <= times["tuned"].p80_us
    assert times["copy"].calls == 3


def test_events_are_ordered_by_start_time_whatever_the_trace_order() -> None:
    trace = Trace()
    trace.call(("k", 2.0))
    trace.call(("k", 4.0))
    times = device_times(list(reversed(trace.events)), ["only"], 2)
    assert times["only"].median_us == pytest.approx(3.0)


def test_a_trace_with_the_wrong_number_of_calls_is_refused() -> None:
    trace = Trace()
    trace.call(("k", 2.0))
    with pytest.raises(ValueError, match="1 bracketed calls, expected 2"):
        device_times(trace.events, ["a", "b"], 1)


def test_a_call_that_ran_nothing_is_refused() -> None:
    trace = Trace()
    trace.call()
    with pytest.raises(ValueError, match="ran no kernel"):
        device_times(trace.events, ["a"], 1)


@pytest.mark.parametrize(
    ("names", "message"),
    [
        ([BEGIN_MARKER, BEGIN_MARKER, END_MARKER], "two begin markers"),
        ([END_MARKER], "without a begin marker"),
        ([BEGIN_MARKER, "k"], "ends inside a call"),
    ],
)
def test_unbalanced_markers_are_refused(names: list[str], message: str) -> None:
    events = [{"cat": "kernel", "name": n, "ts": float(i), "dur": 1.0} for i, n in enumerate(names)]
    with pytest.raises(ValueError, match=message):
        split_calls(events)
