"""The peers benchmark's loop on the CPU: the device-time pass over a fake profiler's trace."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from bench_loop_helpers import (
    SHAPE,
    bench_of,
    fake_device,
    plan,
    script_fixture,  # noqa: F401  (the `script` fixture)
    tuned_choice,
)

from tuner import peers as pb
from variants import DTYPES

torch = pytest.importorskip("torch")
torch_peers = pytest.importorskip("tuner.runners.gpu.torch_peers")


def fake_trace(durations):
    """trace_calls' stand-in: runs every side's launch as the profiling pass would and lays out
    the events it would record (durations[side] us of work per call; flush kernels outside the
    markers)."""
    from tuner.runners.kernel_trace import BEGIN_MARKER, END_MARKER

    seen = []

    def trace_calls(sides, flush, calls):
        events, now = [], 0.0

        def add(name, dur, cat="kernel"):
            nonlocal now
            events.append({"cat": cat, "name": name, "ts": now, "dur": dur})
            now += dur + 1.0

        seen.append(list(sides))
        for side, launch in sides.items():
            for i in range(calls):
                flush()
                add("flush_reduce", 19.0)
                add(BEGIN_MARKER, 0.5)
                launch()
                category = "gpu_memcpy" if side == pb.COPY_PEER else "kernel"
                add(side, durations[side] + 0.01 * (i % 3), category)
                add(END_MARKER, 0.5)
        return events

    trace_calls.seen = seen
    return trace_calls


def test_device_time_profiles_the_copy_the_tuned_kernel_and_the_fastest_peers(script) -> None:
    fp32 = DTYPES["fp32"]
    device = fake_device(script)
    durations = {pb.COPY_PEER: 4.0, pb.EMPTY_PEER: 1.0, pb.TUNED_PEER: 3.0}
    device.copy_launch = lambda nbytes, method: lambda: None
    bench = bench_of(script, plan(groups=["llmc", "eager"]), device=device)
    bench.choices = tuned_choice(fp32)
    bench.first_pass(SHAPE, fp32)
    ok = [r for r in bench.rows if r["kind"] in pb.PEER_KINDS and r["status"] == "ok"]
    peers = sorted(ok, key=lambda r: r["time_ms"])
    fastest = [r["peer"] for r in peers[: pb.DEVICE_PEERS]]
    for i, peer in enumerate(fastest):  # by device time, the slowest by event time is the fastest
        durations[peer] = 3.3 - 0.1 * i
    device.trace_calls = fake_trace(durations)
    bench.device_time(SHAPE, fp32)
    assert device.trace_calls.seen == [[pb.COPY_PEER, pb.EMPTY_PEER, pb.TUNED_PEER, *fastest]]
    by_peer = {r["peer"]: r for r in bench.rows}
    assert by_peer[pb.TUNED_PEER]["device_us"] == pytest.approx(3.01)
    assert by_peer[pb.COPY_PEER]["device_kernels"] == 1
    assert math.isnan(by_peer[peers[-1]["peer"]]["device_us"])  # not among the fastest
    line = pb.summary(pb.derive(pd.DataFrame(bench.rows), None)).iloc[0]
    assert line["device_peer"] == fastest[-1]
    assert line["device_vs_peer"] == pytest.approx((durations[fastest[-1]] + 0.01) / 3.01, rel=1e-3)
    assert line["tuned_device_x_copy"] == pytest.approx(3.01 / 4.01, rel=1e-3)
    assert "Device time per call" in pb.render(pb.summary(pb.derive(pd.DataFrame(bench.rows), None)))


def test_a_failed_trace_leaves_the_rows_as_they_were(script) -> None:
    fp32 = DTYPES["fp32"]
    device = fake_device(script)
    device.copy_launch = lambda nbytes, method: lambda: None
    device.trace_calls = lambda sides, flush, calls: []  # no bracketed calls at all
    bench = bench_of(script, plan(groups=["eager"]), device=device)
    bench.choices = tuned_choice(fp32)
    bench.first_pass(SHAPE, fp32)
    bench.device_time(SHAPE, fp32)
    assert all(math.isnan(r["device_us"]) for r in bench.rows)
    text = pb.render(pb.summary(pb.derive(pd.DataFrame(bench.rows), None)))
    assert "Device time per call" not in text


def test_a_run_without_a_profiler_skips_the_pass(script, tmp_path: Path) -> None:
    bench = bench_of(script, plan(groups=["eager"]), out=tmp_path / "p.parquet")
    bench.choices = tuned_choice(DTYPES["fp32"])
    assert bench.run() == 0
    assert pd.read_parquet(tmp_path / "p.parquet")["device_us"].isna().all()


def test_a_side_that_cannot_be_rebuilt_is_left_out_of_the_profile(script) -> None:
    fp32 = DTYPES["fp32"]
    device = fake_device(script)
    device.copy_launch = lambda nbytes, method: lambda: None
    bench = bench_of(script, plan(groups=["eager"]), device=device)
    bench.choices = tuned_choice(fp32)
    bench.first_pass(SHAPE, fp32)
    ok = [r for r in bench.rows if r["kind"] in pb.PEER_KINDS and r["status"] == "ok"]
    broken = min(ok, key=lambda r: r["time_ms"])["peer"]

    def fails():
        raise ValueError("3 elements wrong")

    bench.rebuilders[(SHAPE.key, "fp32", broken)] = fails
    others = [r["peer"] for r in sorted(ok, key=lambda r: r["time_ms"])[1 : pb.DEVICE_PEERS]]
    durations = {pb.COPY_PEER: 4.0, pb.EMPTY_PEER: 1.0, pb.TUNED_PEER: 3.0, **dict.fromkeys(others, 3.5)}
    device.trace_calls = fake_trace(durations)
    bench.device_time(SHAPE, fp32)
    assert device.trace_calls.seen == [[pb.COPY_PEER, pb.EMPTY_PEER, pb.TUNED_PEER, *others]]
    by_peer = {r["peer"]: r for r in bench.rows}
    assert math.isnan(by_peer[broken]["device_us"]) and by_peer[pb.TUNED_PEER]["device_us"] > 0
