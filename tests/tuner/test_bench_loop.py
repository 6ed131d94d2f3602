"""The peers benchmark's measuring loop (scripts/bench_kernels.py, PeerBench) on the CPU: a fake
session over numpy buffers and a fake timer stand in for the device, so every step but the
GPU itself runs: validation before timing, failures as rows, the Triton peer (interpreter),
torch.compile (traced with aot_eager), the max-autotune order and budget, the parquet, the
report. Times here are made up by the fakes."""

from __future__ import annotations

import importlib
import itertools
import math
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from tuner import peers as pb
from tuner.runners.runner import Measurement
from variants import DTYPES, FAMILIES, Config, Shape
from variants.reference import decode, encode, nan_bits, random_input, reference, validate_output

torch = pytest.importorskip("torch")
torch_peers = pytest.importorskip("tuner.runners.gpu.torch_peers")

REPO = Path(__file__).resolve().parents[2]
SHAPE = Shape(2, 3, 8, 2, 16)
OTHER = Shape(1, 4, 4, 1, 80)


@pytest.fixture(scope="module")
def script():
    """What the loop is made of, from the parts of scripts/bench_kernels.py."""
    sys.path.insert(0, str(REPO / "scripts"))
    from bench_kernels_parts.device import Device
    from bench_kernels_parts.loop import PeerBench
    from bench_kernels_parts.preparation import prepare_kernels, tuned_choices
    from bench_kernels_parts.report import report

    return SimpleNamespace(
        Device=Device,
        PeerBench=PeerBench,
        prepare_kernels=prepare_kernels,
        report=report,
        tuned_choices=tuned_choices,
    )


class FakeSession:
    """DeviceSession's interface over numpy arrays; `measure` answers without running anything."""

    families = FAMILIES

    def __init__(self) -> None:
        self.flush = lambda: None
        self._buffers = None
        self.timing_flush = lambda: self.flush
        self.measured = []
        self.releases = 0

    def buffers(self, shape, dtype):
        key = (shape, dtype.name)
        if self._buffers is None or self._buffers[0] != key:
            dout = np.empty(shape.dout_numel, dtype=dtype.storage)
            dinp = np.empty(shape.dinp_numel, dtype=dtype.storage)
            self._buffers = (key, dout, dinp)
        return self._buffers[1], self._buffers[2]

    def release(self) -> None:
        self._buffers = None
        self.releases += 1

    def run_checked(self, shape, dtype, launch):
        dout, dinp = self.buffers(shape, dtype)
        dout[...] = random_input(shape, dtype, np)
        dinp.view(np.uint32 if dtype.itemsize == 4 else np.uint16).fill(nan_bits(dtype))
        launch()
        return validate_output(dinp, dout, shape, dtype, np)

    def launcher(self, shape, dtype, config):
        """A launch that writes the reference (or, with block 1024, nothing): what a kernel does."""
        dout, dinp = self.buffers(shape, dtype)

        def launch():
            if config.values.get("block") != 1024:
                dinp[...] = encode(reference(decode(dout, dtype), shape).ravel(), dtype)

        return launch

    def measure(self, shape, dtype, config):
        self.measured.append((shape, dtype.name, config.key))
        block = config.values.get("block", 0)
        if block == 1024:
            return Measurement.failed("launch_error", "too many resources requested")
        return Measurement("ok", time_ms=0.05 + block / 1e4, p20_ms=0.05, p80_ms=0.06, reps=100)


def to_torch(array, dtype):
    if dtype.name == "bf16":
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)


def to_storage(tensor, dtype):
    if dtype.name == "bf16":
        return tensor.contiguous().view(torch.int16).numpy().view(np.uint16).ravel()
    return tensor.contiguous().numpy().ravel()


def fake_device(script, session=None):
    counter = itertools.count(1)
    calls = []

    def time_calls(launch, flush, reps):
        for _ in range(3):
            flush()
            launch()
        calls.append(reps)
        t = 0.01 + 0.001 * next(counter)
        return SimpleNamespace(median_ms=t, p20_ms=t * 0.9, p80_ms=t * 1.1, reps=reps)

    def time_copy(nbytes, flush, reps):
        t = SimpleNamespace(median_ms=0.01 + nbytes * 1e-12, p20_ms=0.009, p80_ms=0.011, reps=reps)
        return "kernel", t

    device = script.Device(
        session=session or FakeSession(),
        xp=np,
        time_calls=time_calls,
        time_copy=time_copy,
        empty_launch=lambda: None,
        to_torch=to_torch,
        to_storage=to_storage,
        torch_device="cpu",
        name="Fake CPU",
        label="fake",
        meta={"gpu": "Fake CPU", "gpu_label": "fake"},
    )
    device.calls = calls
    return device


def plan(**changes) -> pb.Plan:
    values = {
        "shapes": [SHAPE],
        "dtypes": [DTYPES["fp32"]],
        "groups": ["llmc", "eager", "compile"],
        "eager": torch_peers.EAGER,
        "compiled": torch_peers.COMPILED,
        "max_autotune": (),
        "triton_configs": 5,
        "reps": 100,
        "budget_s": 0.0,
    }
    values.update(changes)
    return pb.Plan(**values)


def bench_of(script, plan_, device=None, **kwargs):
    return script.PeerBench(
        plan_, device or fake_device(script), start=0.0, compile_backend="aot_eager", **kwargs
    )


@pytest.mark.parametrize("dtype_name", ["fp32", "bf16"])
def test_first_pass_validates_then_times_every_peer(script, dtype_name: str) -> None:
    bench = bench_of(script, plan(dtypes=[DTYPES[dtype_name]]))
    bench.first_pass(SHAPE, DTYPES[dtype_name])
    rows = pd.DataFrame(bench.rows).set_index("peer")
    expected = plan().peers_per_pair()
    assert list(rows.index) == expected
    assert rows.loc[pb.TUNED_PEER, "status"] == "missing"  # no store here
    assert rows.loc[pb.llmc_peer(1024), "status"] == "launch_error"
    ok = rows[rows["status"] == "ok"]
    assert set(ok.index) == set(expected) - {pb.TUNED_PEER, pb.llmc_peer(1024)}
    assert ok["time_ms"].notna().all() and (ok["reps"] == 100).all()
    compiled = rows.loc[[pb.compile_peer("default", f) for f in torch_peers.COMPILED]]
    assert (compiled["graphs"] == 1).all() and (compiled["compile_s"] > 0).all()
    assert (compiled["message"] == "").all() and (compiled["config"] == "mode=default").all()
    assert rows.loc[pb.COPY_PEER, "config"].startswith("16-byte copy kernel of")
    assert rows.loc[pb.COPY_PEER, "config"].endswith("(kernel)")
    assert bench.session.measured[0][2].startswith("naive[block=32]")
    assert bench.session.releases >= 2  # before the copy and at the end of the pair


def test_a_wrong_or_failing_peer_is_a_row_not_a_time(script, monkeypatch) -> None:
    def drops_a_replica(dout, B, T, NH, NH_KV, HD):
        d = dout.view(B, T, 3, NH, HD)
        kv = d[:, :, 1:].reshape(B, T, 2, NH_KV, NH // NH_KV, HD)[:, :, :, :, 1:].sum(dim=4)
        return torch.cat([d[:, :, 0], kv.reshape(B, T, 2 * NH_KV, HD)], dim=2)

    def stale(dout, B, T, NH, NH_KV, HD):  # never writes its output
        return dout.new_empty(B, T, NH + 2 * NH_KV, HD)

    def raises(dout, B, T, NH, NH_KV, HD):
        raise ValueError("no such op")

    def wrong_shape(dout, B, T, NH, NH_KV, HD):
        return dout.view(B, T, 3 * NH, HD)

    formulations = {"drops": drops_a_replica, "stale": stale, "raises": raises, "shape": wrong_shape}
    monkeypatch.setattr(torch_peers, "FORMULATIONS", {**torch_peers.FORMULATIONS, **formulations})
    device = fake_device(script)
    bench = bench_of(script, plan(groups=["eager"], eager=tuple(formulations)), device=device)
    bench.first_pass(SHAPE, DTYPES["fp32"])
    rows = pd.DataFrame(bench.rows).set_index("peer")
    assert rows.loc["eager:drops", "status"] == "wrong_result"
    assert "elements wrong" in rows.loc["eager:drops", "message"]
    assert rows.loc["eager:stale", "status"] == "wrong_result"
    assert (
        rows.loc["eager:raises", "status"] == "error" and "no such op" in rows.loc["eager:raises", "message"]
    )
    assert (
        rows.loc["eager:shape", "status"] == "wrong_result"
        and "expected" in rows.loc["eager:shape", "message"]
    )
    failed = rows.loc[["eager:drops", "eager:stale", "eager:raises", "eager:shape"]]
    assert failed["time_ms"].isna().all()
    assert len(device.calls) == 1  # only the empty launch was timed


def test_a_lost_device_stops_the_run_and_keeps_the_rows(script, monkeypatch, tmp_path: Path) -> None:
    def crashes(dout, B, T, NH, NH_KV, HD):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(torch_peers, "FORMULATIONS", {**torch_peers.FORMULATIONS, "crashes": crashes})
    out = tmp_path / "sub" / "peers.parquet"
    bench = bench_of(
        script, plan(shapes=[SHAPE, OTHER], groups=["eager"], eager=("sum_cat", "crashes")), out=out
    )
    assert bench.run() == 1
    written = pd.read_parquet(out)
    assert list(written["peer"]) == [pb.COPY_PEER, pb.EMPTY_PEER, pb.TUNED_PEER, "eager:sum_cat"]
    assert (written["shape"] == SHAPE.key).all() and written["gpu"].eq("Fake CPU").all()


def test_a_run_writes_parquet_and_reports_tables_last(script, tmp_path: Path) -> None:
    out = tmp_path / "peers.parquet"
    p = plan(shapes=[SHAPE, OTHER], dtypes=[DTYPES["bf16"], DTYPES["fp16"]], groups=["llmc", "eager"])
    bench = bench_of(script, p, out=out, peak_gbps=4800.0)
    assert bench.run() == 0
    written = pd.read_parquet(out)
    assert len(written) == 4 * len(p.peers_per_pair())
    assert written.groupby(["shape", "dtype", "peer"]).size().max() == 1
    for column in (
        "time_ms",
        "p20_ms",
        "p80_ms",
        "status",
        "ratio_to_copy",
        "gbps",
        "frac_peak",
        "ratio_to_empty",
    ):
        assert column in written
    ok = written[written["status"] == "ok"]
    assert ok["ratio_to_copy"].notna().all() and ok["gbps"].notna().all()
    text = script.report(bench)
    assert text.rstrip().splitlines()[-1].startswith("| 1,4,4,1,80 | fp16 |")
    assert "rows by status:" in text and "failed:" in text  # the tuned kernel is missing here
    assert not list(tmp_path.glob(".*tmp"))


def test_a_row_timed_under_a_longer_hold_says_so(script, tmp_path: Path) -> None:
    device = fake_device(script)
    device.meta["hold_us"] = 150.0
    timed = device.time_calls

    def compiled_calls_retimed(launch, flush, reps):
        t = timed(launch, flush, reps)
        slow_to_issue = len(device.calls) % 2 == 0  # every other peer, as a compiled one would be
        return SimpleNamespace(**vars(t), hold_us=550.0 if slow_to_issue else 150.0)

    device.time_calls = compiled_calls_retimed
    out = tmp_path / "peers.parquet"
    bench = bench_of(script, plan(groups=["eager"]), device=device, out=out)
    assert bench.run() == 0
    written = pd.read_parquet(out)
    timed_rows = written[written["status"] == "ok"]
    assert set(timed_rows["hold_us"]) == {150.0, 550.0}
    assert written["hold_us"].notna().all()  # rows without a time carry the run's hold


def test_triton_peer_runs_through_the_session_check(script, monkeypatch) -> None:
    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    triton_peer = importlib.reload(importlib.import_module("tuner.runners.gpu.triton_peer"))

    def fake_bench(kernel_call, quantiles):
        kernel_call()
        return [1.0, 1.0, 1.0]

    kernel = triton_peer.make_autotuned(do_bench=fake_bench)
    monkeypatch.setattr(triton_peer, "autotuned", lambda: kernel)
    bench = bench_of(script, plan(shapes=[OTHER], dtypes=[DTYPES["bf16"]], groups=["triton"]))
    bench.first_pass(OTHER, DTYPES["bf16"])
    row = bench.rows[-1]
    assert row["peer"] == pb.TRITON_PEER and row["status"] == "ok", row["message"]
    assert row["config"].startswith("ELEMS=") and row["compile_s"] > 0


def test_triton_failing_validation_is_reported(script, monkeypatch) -> None:
    pytest.importorskip("triton")
    from tuner.runners.gpu import triton_peer

    def writes_nothing(dout, dinp, *dims, kernel=None):
        return None

    monkeypatch.setattr(triton_peer, "repkv_backward_triton", writes_nothing)
    bench = bench_of(script, plan(groups=["triton"]))
    bench.triton(SHAPE, DTYPES["fp32"])
    assert bench.rows[-1]["status"] == "wrong_result" and math.isnan(bench.rows[-1]["time_ms"])


def test_second_pass_takes_the_closest_races_first_within_the_budget(script, monkeypatch) -> None:
    fp32 = DTYPES["fp32"]
    shapes = [SHAPE, OTHER, Shape(1, 2, 4, 2, 16)]
    p = plan(
        shapes=shapes,
        dtypes=[fp32],
        groups=["compile", "max-autotune"],
        max_autotune=("sum_cat", "repeat_kv_bwd"),
    )
    bench = bench_of(script, p)
    # fastest peer / tuned: SHAPE 2.0, OTHER 1.1, the third has no tuned kernel (last)
    for shape, tuned, peer in ((SHAPE, 0.01, 0.02), (OTHER, 0.01, 0.011), (shapes[2], None, 0.01)):
        if tuned:
            bench.rows.append(pb.make_row(shape, fp32, pb.TUNED_PEER, pb.TUNED, time_ms=tuned))
        bench.rows.append(pb.make_row(shape, fp32, "eager:sum_cat", pb.EAGER, time_ms=peer))
    ran = []
    monkeypatch.setattr(
        bench, "tensor_peer", lambda shape, dtype, peer, kind, name, compile_mode: ran.append((shape, name))
    )
    allowed = iter([True, True, True, True, False, False])
    monkeypatch.setattr(bench.budget, "allows", lambda what, now: next(allowed))
    bench.second_pass()
    assert ran == [(OTHER, "sum_cat"), (SHAPE, "sum_cat"), (shapes[2], "sum_cat"), (OTHER, "repeat_kv_bwd")]
    skipped = [r for r in bench.rows if r["status"] == "skipped"]
    assert [r["shape"] for r in skipped] == [SHAPE.key, shapes[2].key]
    assert all(r["peer"] == "compile[max-autotune]:repeat_kv_bwd" for r in skipped)
    assert "time budget" in skipped[0]["message"]


def test_first_pass_skips_compiles_past_the_budget(script, monkeypatch) -> None:
    bench = bench_of(script, plan(groups=["compile"], budget_s=1.0))
    monkeypatch.setattr(bench, "now", lambda: 100.0)
    bench.first_pass(SHAPE, DTYPES["fp32"])
    statuses = {r["peer"]: r["status"] for r in bench.rows}
    assert statuses[pb.compile_peer("default", "sum_cat")] == "skipped"
    assert statuses[pb.COPY_PEER] == "ok"  # measurements of what needs no compile go on


def test_tuned_rows_come_from_the_store_exact_or_nearest(script) -> None:
    bf16 = DTYPES["bf16"]
    exact, nearest = Shape(8, 1024, 32, 8, 128), Shape(1, 384, 32, 8, 64)
    pairs = [(exact, bf16), (nearest, bf16)]
    said = []
    choices = script.tuned_choices(REPO / "results" / "data", "h200", pairs, said.append)
    assert not said and all(choices[(s, "bf16")] is not None for s, _ in pairs)
    session = FakeSession()
    bench = bench_of(
        script, plan(shapes=[exact, nearest], dtypes=[bf16], groups=[]), fake_device(script, session)
    )
    bench.choices = choices
    for shape, dtype in pairs:
        bench.tuned(shape, dtype)
    first, second = bench.rows
    assert (
        first["status"] == "ok" and first["match"] == "exact" and first["tuned_from"] == f"{exact.key} bf16"
    )
    assert second["match"] == "nearest" and second["tuned_from"].endswith("bf16")
    assert second["message"].startswith("nearest, tuned at ")
    assert [key for _, _, key in session.measured] == [first["config"], second["config"]]
    assert first["config"] == choices[(exact, "bf16")].candidate.config.key

    class Kernels:
        def prepare(self, work):
            self.work = list(work)
            return 0

    session.kernels = Kernels()
    count, failed = script.prepare_kernels(session, pairs, choices, llmc=True)
    expressions = {expression for _, expression in session.kernels.work}
    assert failed == 0 and count == len(expressions)
    assert "repkv_naive<__nv_bfloat16>" in expressions and len(expressions) >= 2  # naive + the tuned


def test_no_results_for_the_label_says_so(script) -> None:
    said = []
    pairs = [(SHAPE, DTYPES["fp32"])]
    choices = script.tuned_choices(REPO / "results" / "data", "nosuchgpu", pairs, said.append)
    assert choices == {(SHAPE, "fp32"): None}
    assert "no results for GPU label 'nosuchgpu'" in said[0] and "h200" in said[0]


def tuned_choice(dtype):
    """What the selection would serve SHAPE: llm.c's kernel at block 256 (the fake session
    measures it at 0.05 + 256/1e4 ms)."""
    config = Config.of("naive", block=256)
    group = SimpleNamespace(shape=SHAPE, dtype=dtype)
    return {
        (SHAPE, dtype.name): SimpleNamespace(
            group=group, candidate=SimpleNamespace(config=config), match="exact"
        )
    }


def test_head_to_head_times_the_tuned_kernel_and_the_fastest_peer_in_alternating_rounds(script) -> None:
    fp32 = DTYPES["fp32"]
    device = fake_device(script)
    bench = bench_of(script, plan(groups=["llmc", "eager"]), device=device)
    bench.choices = tuned_choice(fp32)
    bench.first_pass(SHAPE, fp32)
    peers = [r for r in bench.rows if r["kind"] in pb.PEER_KINDS and r["status"] == "ok"]
    fastest = min(peers, key=lambda r: r["time_ms"])["peer"]
    timed_before = len(device.calls)
    bench.head_to_head(SHAPE, fp32)
    h2h = [r for r in bench.rows if r["kind"] == pb.HEAD_TO_HEAD]
    assert [r["peer"] for r in h2h] == [pb.head_to_head_peer(pb.TUNED_PEER), pb.head_to_head_peer(fastest)]
    assert len(device.calls) - timed_before == 2 * pb.H2H_ROUNDS
    # the fake timer counts up, and rounds alternate who goes first: tuned, peer | peer, tuned | ...
    calls = [0.01 + 0.001 * n for n in range(timed_before + 1, timed_before + 2 * pb.H2H_ROUNDS + 1)]
    tuned = [calls[0], calls[3], calls[4], calls[7], calls[8]]
    peer = [calls[1], calls[2], calls[5], calls[6], calls[9]]
    # each side stands by its median round, so one fast or slow round decides nothing
    middle = {side: sorted(times)[len(times) // 2] for side, times in (("tuned", tuned), ("peer", peer))}
    assert h2h[0]["time_ms"] == pytest.approx(middle["tuned"])
    assert h2h[1]["time_ms"] == pytest.approx(middle["peer"])
    assert h2h[0]["p20_ms"] == pytest.approx(middle["tuned"] * 0.9)  # that round's own spread
    assert h2h[0]["config"] == "round medians " + ", ".join(f"{t:.4f}" for t in tuned)
    line = pb.summary(pb.derive(pd.DataFrame(bench.rows), None)).iloc[0]
    assert line["h2h_peer"] == fastest
    assert line["h2h_vs_peer"] == pytest.approx(middle["peer"] / middle["tuned"])


def test_head_to_head_validates_what_it_rebuilds(script, monkeypatch) -> None:
    fp32 = DTYPES["fp32"]
    calls = {"n": 0}

    def right_once(dout, B, T, NH, NH_KV, HD):  # right when first measured, stale when rebuilt
        calls["n"] += 1
        if calls["n"] > 1:
            return dout.new_empty(B, T, NH + 2 * NH_KV, HD)
        return torch_peers.FORMULATIONS["sum_cat"](dout, B, T, NH, NH_KV, HD)

    monkeypatch.setattr(torch_peers, "FORMULATIONS", {**torch_peers.FORMULATIONS, "flaky": right_once})
    device = fake_device(script)
    bench = bench_of(script, plan(groups=["eager"], eager=("flaky",)), device=device)
    bench.choices = tuned_choice(fp32)
    bench.first_pass(SHAPE, fp32)
    timed_before = len(device.calls)
    bench.head_to_head(SHAPE, fp32)
    h2h = [r for r in bench.rows if r["kind"] == pb.HEAD_TO_HEAD]
    assert [r["status"] for r in h2h] == ["error", "error"]
    assert "elements wrong" in h2h[0]["message"]
    assert len(device.calls) == timed_before  # nothing timed
    line = pb.summary(pb.derive(pd.DataFrame(bench.rows), None)).iloc[0]
    assert math.isnan(line["h2h_vs_peer"]) and line["not_timed"] == 2


def test_a_pair_without_a_tuned_kernel_has_no_head_to_head(script) -> None:
    bench = bench_of(script, plan(groups=["eager"]))
    bench.first_pass(SHAPE, DTYPES["fp32"])
    bench.head_to_head(SHAPE, DTYPES["fp32"])
    assert not [r for r in bench.rows if r["kind"] == pb.HEAD_TO_HEAD]


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


def test_a_fed_run_times_every_call_after_the_sessions_timing_flush_and_says_so(
    script, tmp_path: Path
) -> None:
    device = fake_device(script)
    device.meta["l2"] = "fed"
    flushes = []
    device.session.timing_flush = lambda: flushes.append(1) or device.session.flush
    out = tmp_path / "peers.parquet"
    bench = bench_of(script, plan(groups=["eager"]), device=device, out=out)
    assert bench.run() == 0
    written = pd.read_parquet(out)
    timed = written[(written["status"] == "ok") & (written["peer"] != pb.COPY_PEER)]
    assert set(written["l2"]) == {"fed"} and len(flushes) == len(timed) == len(device.calls)


def test_the_tuned_side_of_a_fed_run_is_what_best_l2_fed_serves(script) -> None:
    shape, bf16 = Shape.parse("B=1,T=512,NH=32,NH_KV=8,HD=64"), DTYPES["bf16"]
    cold = script.tuned_choices(None, "h200", [(shape, bf16)], print)[(shape, "bf16")]
    fed = script.tuned_choices(None, "h200", [(shape, bf16)], print, "fed")[(shape, "bf16")]
    assert (cold.group.l2, fed.group.l2) == ("cold", "fed")
    assert cold.candidate.config != fed.candidate.config and fed.match == "exact"
