"""GET /best: what its answer says of the measurement: peak, empty launch, copy timing, hold and L2 state."""

from __future__ import annotations

import pytest
from best_route_helpers import the_answer
from service_client import ready_client
from trial_rows import S1, S2, SPLIT16, VEC16, trial

import variants
from results.store import write_table


def test_a_hopper_only_kernel_says_so_and_the_peak_and_empty_launch_are_given(tmp_path) -> None:
    bulk = {"block": 128, "groups": 2, "stages": 3, "blocks_per_sm": 0, "l2": "none"}
    rows = [
        trial("h200", S1, "bf16", "vec", VEC16, 0.10, number=0),
        trial(
            "h200", S1, "bf16", "bulk", bulk, 0.09, number=1, gpu_name="NVIDIA H200", empty_launch_ms=0.003
        ),
    ]
    write_table(rows, tmp_path, "run")
    with ready_client(tmp_path) as client:
        body = the_answer(client.get("/best", params={"B": 8, "T": 1024, "gpu": "h200"}))
    assert body["kernel"]["family"] == "bulk"
    assert body["kernel"]["min_compute_capability"] == 90
    measured = body["measured"]
    assert measured["frac_peak"] == pytest.approx(measured["gbps"] / 4800.0)
    assert measured["empty_launch_ms"] == pytest.approx(0.003)
    assert measured["ratio_to_empty_launch"] == pytest.approx(0.09 / 0.003)
    assert variants.get_family("vec").min_compute_capability == 0


def test_the_answer_says_how_its_copy_was_timed(tmp_path) -> None:
    rows = [
        trial("h200", S1, "bf16", "vec", VEC16, 0.10, number=0, copy_method="fastest"),
        trial("h200", S2, "bf16", "vec", VEC16, 0.10, number=1),  # timed before: memcpy alone
    ]
    write_table(rows, tmp_path, "run")
    with ready_client(tmp_path) as client:
        fastest = the_answer(client.get("/best", params={"B": S1.B, "T": S1.T, "gpu": "h200"}))
        before = the_answer(client.get("/best", params=S2.as_dict() | {"gpu": "h200"}))
    assert fastest["measured"]["copy_method"] == "fastest"
    assert before["measured"]["copy_method"] is None


def test_a_group_timed_with_the_hold_is_served_from_those_rows_and_says_so(tmp_path) -> None:
    rows = [
        trial("h200", S1, "bf16", "vec", VEC16, 0.10, number=0, hold_us=150.0),
        trial("h200", S1, "bf16", "split", SPLIT16, 0.08, number=1),  # older, unheld: ranked after
    ]
    write_table(rows, tmp_path, "run")
    with ready_client(tmp_path) as client:
        body = the_answer(client.get("/best", params={"B": 8, "T": 1024, "gpu": "h200"}))
    assert body["kernel"]["family"] == "vec" and body["measured"]["hold_us"] == 150.0


def test_l2_fed_serves_the_configurations_tuned_fed_and_each_answer_says_its_state(tmp_path) -> None:
    rows = [
        trial("h200", S1, "bf16", "split", SPLIT16, 0.08, number=0, hold_us=150.0),
        trial("h200", S1, "bf16", "vec", VEC16, 0.10, number=1, hold_us=150.0),
        trial("h200", S1, "bf16", "vec", VEC16, 0.05, number=2, hold_us=150.0, l2="fed"),
        trial("h200", S1, "bf16", "split", SPLIT16, 0.06, number=3, hold_us=150.0, l2="fed"),
        trial("h100", S1, "bf16", "split", SPLIT16, 0.09, number=4),  # cold only
    ]
    write_table(rows, tmp_path, "run")
    shape = {"B": S1.B, "T": S1.T}
    with ready_client(tmp_path) as client:
        cold = the_answer(client.get("/best", params=shape | {"gpu": "h200"}))
        fed = the_answer(client.get("/best", params=shape | {"gpu": "h200", "l2": "fed"}))
        borrowed = the_answer(client.get("/best", params=shape | {"gpu": "h100", "l2": "fed"}))
        every = client.get("/best", params=shape | {"l2": "fed"}).json()["answers"]
        bad = client.get("/best", params=shape | {"l2": "warm"})
    assert (cold["kernel"]["family"], cold["l2"], cold["measured"]["time_ms"]) == ("split", "cold", 0.08)
    assert (fed["kernel"]["family"], fed["l2"], fed["measured"]["time_ms"]) == ("vec", "fed", 0.05)
    assert (borrowed["kernel"]["family"], borrowed["l2"]) == ("split", "cold")  # h100 has no fed rows
    assert [(a["gpu"], a["l2"]) for a in every] == [("h100", "cold"), ("h200", "fed")]
    assert bad.status_code == 422 and "l2" in bad.text
