"""GET /best: the configuration it serves a shape, exact, nearest or of another GPU, and how it says so."""

from __future__ import annotations

from pathlib import Path

import pytest
from best_route_helpers import the_answer
from fastapi.testclient import TestClient
from service_client import ready_client
from trial_rows import S1, S2, SPLIT16, VEC16, h100_rows, trial

import variants
from results.best import winners
from results.store import load_results, write_table


def test_exact_match_serves_the_winner_with_its_launch_recipe(client: TestClient) -> None:
    r = client.get("/best", params={"B": 8, "T": 1024, "gpu": "h100"})
    assert r.status_code == 200, r.text
    body = the_answer(r)
    assert body["match"] == "exact" and body["distance"] == 0 and body["rank"] == 0
    kernel = body["kernel"]
    split = variants.get_family("split")
    config = variants.Config.of("split", block=512, vec_bytes=16, items=4, load="ldg", store="stcs")
    bf16 = variants.get_dtype("bf16")
    assert kernel["family"] == "split"
    assert kernel["name_expression"] == split.name_expression(S1, bf16, config)
    launch = split.geometry(S1, bf16, config, 132)
    assert (kernel["grid"], kernel["block"]) == (launch.grid, launch.block)
    assert kernel["compile_options"] == list(split.compile_options)
    assert kernel["kernel_arguments"] == variants.KERNEL_ARGUMENTS
    assert kernel["source_url"] == f"/kernels/{split.source_hash}"
    assert kernel["source"] is None
    measured = body["measured"]
    assert measured["time_ms"] == pytest.approx(0.09)
    assert measured["baseline_ms"] == pytest.approx(0.70)
    assert measured["speedup_vs_baseline"] == pytest.approx(0.70 / 0.09)
    assert measured["gpu_name"] == "SYNTHETIC H100" and measured["source_current"] is True
    assert measured["measured_at"].startswith("2025-01-01")


def test_exact_answer_agrees_with_results_best_winners(client: TestClient, served_dir: Path) -> None:
    frame, _ = load_results(served_dir)
    best = winners(frame)
    row = best[(best["gpu"] == "h100") & (best["T"] == 1024) & (best["B"] == 1) & (best["dtype"] == "bf16")]
    body = the_answer(client.get("/best", params={"B": 1, "T": 1024, "gpu": "h100"}))
    assert body["kernel"]["config_key"] == row["config_key"].item()
    assert body["measured"]["speedup_vs_baseline"] == pytest.approx(row["speedup_vs_baseline"].item())


def test_failed_trials_are_never_served(client: TestClient) -> None:
    # a wrong_result row at 0.001 ms and a crash row exist for S1; neither may win
    body = the_answer(client.get("/best", params={"B": 8, "T": 1024, "gpu": "h100"}))
    assert body["kernel"]["family"] == "split"


def test_nearest_names_the_tuned_shape_and_distance(client: TestClient) -> None:
    body = the_answer(client.get("/best", params={"B": 4, "T": 1024, "gpu": "h100"}))
    assert body["match"] == "nearest"
    assert body["tuned_shape"] == S1.as_dict() and body["tuned_dtype"] == "bf16"
    assert body["distance"] == pytest.approx(2.0)  # tokens and bytes both half of S1's
    assert body["shape"] == variants.Shape(4, 1024, 32, 8, 128).as_dict()
    split = variants.get_family("split")
    config = variants.Config.of("split", block=512, vec_bytes=16, items=4, load="ldg", store="stcs")
    launch = split.geometry(variants.Shape(4, 1024, 32, 8, 128), variants.get_dtype("bf16"), config, 132)
    assert body["kernel"]["grid"] == launch.grid  # geometry of the requested shape, not the tuned one


def test_same_dtype_is_preferred_over_a_closer_other_dtype(client: TestClient) -> None:
    body = the_answer(client.get("/best", params={"B": 8, "T": 1024, "gpu": "h100", "dtype": "fp32"}))
    assert body["tuned_dtype"] == "fp32" and body["kernel"]["family"] == "vec"
    assert body["match"] == "partial"  # S1 in fp32 holds vec alone: one family searched
    body = the_answer(client.get("/best", params={"B": 8, "T": 1024, "gpu": "h100", "dtype": "fp16"}))
    assert body["match"] == "nearest" and body["tuned_dtype"] == "bf16"


def test_a_shape_searched_for_one_family_is_answered_partial(tmp_path) -> None:
    """A shape tuned with `--family split` alone is served its best, measured there, as
    "partial" (no rule quality: not a nearest answer); a second family there makes it "exact"."""
    odd = variants.Shape(2, 640, 32, 8, 128)
    searched = [
        *h100_rows(),
        trial("h100", odd, "bf16", "split", SPLIT16, 0.04, number=0),
        trial("h100", odd, "bf16", "split", {**SPLIT16, "block": 256}, 0.05, number=1),
    ]
    both = [*searched, trial("h100", odd, "bf16", "vec", VEC16, 0.06, number=2)]
    matches = []
    for name, rows in (("searched", searched), ("both", both)):
        write_table(rows, tmp_path / name, "synthetic-h100")
        with ready_client(tmp_path / name) as client:
            body = the_answer(client.get("/best", params={"B": 2, "T": 640, "gpu": "h100"}))
            schema = client.get("/openapi.json").json()["components"]["schemas"]["BestAnswer"]
        assert schema["properties"]["match"]["enum"] == ["exact", "partial", "nearest"]
        assert body["tuned_shape"] == odd.as_dict() and body["kernel"]["family"] == "split"
        assert (body["tier"], body["distance"], body["rank"], body["rule_quality"]) == (0, 0, 0, None)
        assert body["measured"]["time_ms"] == pytest.approx(0.04)
        matches.append(body["match"])
    assert matches == ["partial", "exact"]


def test_a_rejected_configuration_is_skipped_for_the_next_best(client: TestClient) -> None:
    # HD=100, a layout nobody tuned, is not a multiple of 8 bf16 lanes: split and vec (16-byte)
    # reject it; of the rest, the layout rule serves gather (S2's best, never measured at S1)
    # over naive (7x S1's best and 4x S2's)
    body = the_answer(client.get("/best", params={"B": 8, "T": 1024, "HD": 100, "gpu": "h100"}))
    assert body["match"] == "nearest" and body["tuned_shape"] == S2.as_dict()
    assert body["kernel"]["family"] == "gather" and body["rank"] == 0


def test_falls_back_to_the_next_shape_when_every_configuration_rejects(client: TestClient) -> None:
    body = the_answer(client.get("/best", params={"B": 8, "T": 1024, "HD": 100, "gpu": "l4"}))
    assert body["tuned_shape"] == S2.as_dict() and body["kernel"]["family"] == "gather"


def test_served_configurations_always_accept_the_requested_shape(client: TestClient) -> None:
    for b, t, nh, nh_kv, hd, dtype in [
        (3, 77, 12, 4, 100, "fp16"),
        (1, 1, 1, 1, 1, "fp32"),
        (2, 5000, 64, 64, 24, "bf16"),
        (16, 4096, 48, 6, 80, "bf16"),
    ]:
        r = client.get("/best", params={"B": b, "T": t, "NH": nh, "NH_KV": nh_kv, "HD": hd, "dtype": dtype})
        assert r.status_code == 200, r.text
        shape, dt = variants.Shape(b, t, nh, nh_kv, hd), variants.get_dtype(dtype)
        for answer in r.json()["answers"]:
            kernel = answer["kernel"]
            config = variants.Config(kernel["family"], tuple(sorted(kernel["params"].items())))
            assert variants.get_family(kernel["family"]).rejection(shape, dt, config) is None


def test_without_gpu_answers_every_gpu(client: TestClient) -> None:
    body = client.get("/best", params={"B": 8, "T": 1024}).json()
    assert [a["gpu"] for a in body["answers"]] == ["h100", "h200", "l4"]
    assert body["answers"][1]["kernel"]["family"] == "vec"


def test_with_or_without_gpu_the_response_has_one_shape(client: TestClient) -> None:
    every = client.get("/best", params={"B": 4, "T": 1024, "dtype": "bf16"}).json()
    one = client.get("/best", params={"B": 4, "T": 1024, "dtype": "bf16", "gpu": "h200"}).json()
    for body in (every, one):
        assert set(body) == {"op", "shape", "dtype", "answers"} and body["op"] == "repkv_backward"
        assert body["shape"] == {"B": 4, "T": 1024, "NH": 32, "NH_KV": 8, "HD": 128}
        assert body["dtype"] == "bf16"
    assert len(one["answers"]) == 1 and one["answers"][0] == every["answers"][1]
    assert one["answers"][0]["gpu"] == "h200"


def test_an_old_source_is_served_but_named(client: TestClient) -> None:
    body = the_answer(client.get("/best", params={"B": 8, "T": 1024, "gpu": "h200"}))
    assert body["measured"]["source_hash"] == "0123456789abcdef"
    assert body["measured"]["source_current"] is False
    assert body["kernel"]["source_hash"] == variants.get_family("vec").source_hash


def test_include_source_embeds_the_kernel_source(client: TestClient) -> None:
    body = the_answer(client.get("/best", params={"B": 8, "T": 1024, "gpu": "h100", "include_source": True}))
    assert body["kernel"]["source"] == variants.get_family("split").source


def test_gpu_and_dtype_are_read_in_any_case(client: TestClient) -> None:
    # before: gpu=H100 was 404 and dtype=BF16 422
    lower = the_answer(client.get("/best", params={"B": 8, "T": 1024, "gpu": "h100", "dtype": "bf16"}))
    upper = the_answer(client.get("/best", params={"B": 8, "T": 1024, "gpu": "H100", "dtype": "BF16"}))
    assert upper == lower and upper["gpu"] == "h100" and upper["dtype"] == "bf16"


def test_op_and_l2_are_read_in_any_case_as_gpu_and_dtype_are(client: TestClient) -> None:
    # before: op=REPKV_BACKWARD and l2=COLD were a 422 while gpu=H100 was read
    asked = {"B": 8, "T": 1024, "gpu": "h100"}
    lower = the_answer(client.get("/best", params=asked | {"op": "repkv_backward", "l2": "cold"}))
    upper = the_answer(client.get("/best", params=asked | {"op": "REPKV_Backward", "l2": "COLD"}))
    assert upper == lower and upper["l2"] == "cold"


def test_other_gpus_answers_a_gpu_without_results_and_names_the_measuring_one(client: TestClient) -> None:
    body = the_answer(client.get("/best", params={"B": 8, "T": 1024, "gpu": "v100", "other_gpus": True}))
    assert body["gpu"] == "v100" and body["measured_gpu"] == "h100"
    assert body["match"] == "nearest" and body["rule_quality"] is not None  # tuned on h100, not v100
    own = the_answer(client.get("/best", params={"B": 8, "T": 1024, "gpu": "h200", "other_gpus": True}))
    assert own["measured_gpu"] == "h200" and own["match"] != "nearest" and own["rule_quality"] is None


def test_mha_answers_say_the_op_is_a_copy_of_the_same_bytes(client: TestClient) -> None:
    mha = the_answer(client.get("/best", params={"B": 8, "T": 1024, "NH": 8, "NH_KV": 8, "gpu": "h100"}))
    assert mha["is_copy"] is True and mha["kernel"]["family"]  # a kernel still, for who launches one
    gqa = the_answer(client.get("/best", params={"B": 8, "T": 1024, "gpu": "h100"}))
    assert gqa["is_copy"] is False
