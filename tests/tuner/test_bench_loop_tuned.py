"""The peers benchmark's loop on the CPU: the tuned kernel's rows and its head-to-head rounds."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from bench_loop_helpers import (
    REPO,
    SHAPE,
    FakeSession,
    bench_of,
    fake_device,
    plan,
    script_fixture,  # noqa: F401  (the `script` fixture)
    tuned_choice,
)

from tuner import peers as pb
from variants import DTYPES, Shape

torch = pytest.importorskip("torch")
torch_peers = pytest.importorskip("tuner.runners.gpu.torch_peers")


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


def test_the_tuned_side_of_a_fed_run_is_what_best_l2_fed_serves(script) -> None:
    shape, bf16 = Shape.parse("B=1,T=512,NH=32,NH_KV=8,HD=64"), DTYPES["bf16"]
    cold = script.tuned_choices(None, "h200", [(shape, bf16)], print)[(shape, "bf16")]
    fed = script.tuned_choices(None, "h200", [(shape, bf16)], print, "fed")[(shape, "bf16")]
    assert (cold.group.l2, fed.group.l2) == ("cold", "fed")
    assert cold.candidate.config != fed.candidate.config and fed.match == "exact"
