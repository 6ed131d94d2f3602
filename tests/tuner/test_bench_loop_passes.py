"""The peers benchmark's loop on the CPU: its passes, failures as rows, the parquet, the report."""

from __future__ import annotations

import importlib
import math
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from bench_loop_helpers import (
    SHAPE,
    bench_of,
    fake_device,
    plan,
    script_fixture,  # noqa: F401  (the `script` fixture)
)

from tuner import peers as pb
from variants import DTYPES, Shape

torch = pytest.importorskip("torch")
torch_peers = pytest.importorskip("tuner.runners.gpu.torch_peers")


OTHER = Shape(1, 4, 4, 1, 80)


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
