"""tuner.runners.gpu.timing on a GPU: the flush leaves L2 cold, and the hold makes the GPU wait after it."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu


def test_the_hold_waits_on_the_gpu_after_the_flush() -> None:
    import cupy as cp

    from tuner.runners.gpu.timing import L2Flusher, time_launches

    device = cp.cuda.Device()
    plain, held = L2Flusher(device), L2Flusher(device, hold_us=200.0)
    start, end = cp.cuda.Event(), cp.cuda.Event()
    stream = cp.cuda.get_current_stream()
    for flush, at_least_ms in ((plain, 0.0), (held, 0.2)):
        flush()
        start.record(stream)
        flush()
        end.record(stream)
        end.synchronize()
        assert cp.cuda.get_elapsed_time(start, end) >= at_least_ms
    # the hold is outside the timed call: an empty launch times the same either way, well below it
    assert time_launches(lambda: None, held, reps=20).median_ms < 0.1


def test_every_window_is_kept_and_a_held_cpu_stays_ahead() -> None:
    import cupy as cp
    import numpy as np

    from tuner.runners.gpu.timing import L2Flusher, time_windows

    windows = time_windows(lambda: None, L2Flusher(cp.cuda.Device(), hold_us=200.0), reps=30)
    assert len(windows.ms) == 30 and (windows.ms > 0).all()
    # each call's GPU time carries the flush and the 200 us hold; enqueueing one costs far less
    assert windows.gpu_us > 200.0
    assert windows.cpu_ahead
    assert windows.timing().median_ms == pytest.approx(float(np.median(windows.ms)))


def test_calls_slow_to_issue_are_timed_again_under_a_longer_hold() -> None:
    import time

    import cupy as cp

    from tuner.runners.gpu.timing import L2Flusher, empty_launch, time_launches

    flush = L2Flusher(cp.cuda.Device(), hold_us=150.0)
    empty = empty_launch()
    # a CuPy launch costs the CPU tens of us: far enough ahead of a 1000 us hold, never retimed
    assert time_launches(empty, flush.with_hold(1000.0), reps=30).hold_us == 1000.0

    def slow_to_issue() -> None:  # 300 us of CPU before the launch, as a heavy wrapper's
        until = time.perf_counter() + 300e-6
        while time.perf_counter() < until:
            pass
        empty()

    timing = time_launches(slow_to_issue, flush, reps=30)
    assert timing.hold_us >= 150.0 + 2 * 300.0
    assert timing.median_ms < 0.05  # the GPU's time alone: the wait for the CPU is not in it


def test_a_session_times_an_empty_launch_once() -> None:
    from tuner.runners.gpu.session import DeviceSession

    session = DeviceSession(reps=10)
    assert 0.0 < session.identity.empty_launch_ms < 0.05  # a few microseconds
    session.release()


def test_the_profiled_pass_gives_each_sides_own_device_time() -> None:
    pytest.importorskip("torch")
    import cupy as cp

    from tuner.runners.gpu.kernel_profile import trace_calls
    from tuner.runners.gpu.timing import L2Flusher, device_copy, empty_launch
    from tuner.runners.kernel_trace import device_times

    flush = L2Flusher(cp.cuda.Device(), hold_us=50.0)
    small, large = device_copy(1 << 20), device_copy(64 << 20)
    sides = {"empty": empty_launch(), "small copy": small, "large copy": large}
    times = device_times(trace_calls(sides, flush, 10), list(sides), 10)
    assert all(t.kernels == 1 for t in times.values())
    # 64 MB each way takes some 30 us at HBM speed; an empty kernel a few, at most
    assert times["empty"].median_us < 5.0
    assert times["small copy"].median_us < times["large copy"].median_us
    assert 10.0 < times["large copy"].median_us < 200.0


@pytest.mark.parametrize("nbytes", [1, 17, 4096 * 256 + 7, 5_644_800])
def test_the_copy_kernel_copies_every_byte_and_no_more(nbytes: int) -> None:
    import cupy as cp

    from tuner.runners.gpu.timing import copy_kernel

    src = cp.random.default_rng(nbytes).integers(1, 255, size=nbytes + 32, dtype=cp.uint8)
    dst = cp.zeros(nbytes + 32, dtype=cp.uint8)
    copy_kernel(dst.data.ptr, src.data.ptr, nbytes)()
    cp.cuda.get_current_stream().synchronize()
    assert bool(cp.array_equal(dst[:nbytes], src[:nbytes]))
    assert not bool(dst[nbytes:].any())
    with pytest.raises(ValueError, match="16-byte aligned"):
        copy_kernel(dst.data.ptr + 1, src.data.ptr, nbytes)


def test_the_copy_a_kernel_is_held_to_is_the_faster_of_the_two() -> None:
    import cupy as cp

    from tuner.runners.gpu.timing import L2Flusher, copy_launchers, fastest_copy, time_launches
    from tuner.runners.timing_sources import COPY_METHODS

    flush = L2Flusher(cp.cuda.Device(), hold_us=50.0)
    nbytes = 42_240_000  # an odd token count's bytes: where cudaMemcpyAsync ran slow on an H200
    method, timing = fastest_copy(nbytes, flush, reps=20)
    assert method in COPY_METHODS
    memcpy = time_launches(copy_launchers(nbytes)["memcpy"], flush, reps=20)
    assert timing.median_ms <= memcpy.median_ms * 1.05


def test_a_fed_flusher_writes_all_of_its_target_after_the_flush_and_a_cold_one_nothing() -> None:
    import cupy as cp

    from tuner.runners.gpu.timing import L2Flusher

    device = cp.cuda.Device()
    cold = L2Flusher(device, hold_us=20.0)
    target = cp.zeros(3 * 2**20 + 5, dtype=cp.uint16)  # bf16's storage, an odd size
    assert cold.feeding(target) is cold
    cold.feeding(target)()
    assert not bool(target.any())
    fed = L2Flusher(device, hold_us=20.0, l2="fed")
    feeding = fed.feeding(target)
    assert feeding is not fed and feeding.with_hold(40.0)._fed is target  # a retime still feeds
    feeding()
    cp.cuda.get_current_stream().synchronize()
    assert bool((target == 1).all())


def test_a_fed_session_measures_and_its_rows_say_fed() -> None:
    from tuner.runners.gpu.session import DeviceSession
    from variants import DTYPES, FAMILIES, Shape

    session = DeviceSession(reps=10, l2="fed")
    shape, bf16 = Shape(1, 512, 32, 8, 64), DTYPES["bf16"]
    config = FAMILIES["tile"].valid_configs(shape, bf16)[0]
    measurement = session.measure(shape, bf16, config)
    assert measurement.status == "ok" and 0.0 < measurement.time_ms < 1.0
    assert session.identity.l2 == "fed" and 0.0 < session.copy_ms(shape, bf16) < 1.0
    session.release()
