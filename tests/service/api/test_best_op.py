"""GET /best?op=...: each op is served from its own rows; repkv_backward is the default."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient
from trial_rows import trial

import variants
from results.store import write_table
from service.api.app import create_app
from service.live_store import ResultsStore
from service.settings import Settings

FORWARD_VEC = {"block": 256, "vec_bytes": 16, "load": "ldg", "store": "stcs"}
FORWARD_REPLICATE = {"block": 128, "vec_bytes": 16, "load": "plain", "store": "plain"}


def forward_rows() -> list[dict]:
    shape = variants.Shape(8, 1024, 32, 8, 128)
    return [
        trial("h100", shape, "bf16", "naive", {"block": 128}, 0.30, op="repkv_forward"),
        trial("h100", shape, "bf16", "vec", FORWARD_VEC, 0.07, op="repkv_forward"),
        trial("h100", shape, "bf16", "replicate", FORWARD_REPLICATE, 0.06, op="repkv_forward"),
        # a backward row of the same family name, faster: never an answer of the forward op
        trial("h100", shape, "bf16", "vec", {**FORWARD_VEC}, 0.01, op="repkv_backward"),
    ]


def client_over(directory: Path) -> TestClient:
    store = ResultsStore(directory, interval=30.0)
    return TestClient(create_app(Settings(results_dir=directory, reload_interval=30.0), store))


def test_the_default_op_answers_as_before(client: TestClient) -> None:
    plain = client.get("/best", params={"B": 8, "T": 1024})
    named = client.get("/best", params={"B": 8, "T": 1024, "op": "repkv_backward"})
    assert plain.status_code == named.status_code == 200
    assert plain.json() == named.json() and named.json()["op"] == "repkv_backward"


def test_an_unknown_op_is_a_422_that_lists_the_known_ones(client: TestClient) -> None:
    response = client.get("/best", params={"B": 8, "T": 1024, "op": "rope"})
    assert response.status_code == 422
    text = response.text
    assert all(name in text for name in variants.OPS)


def test_each_op_is_served_from_its_own_rows(tmp_path: Path) -> None:
    directory = tmp_path / "results"
    write_table(forward_rows(), directory, "synthetic-forward")
    with client_over(directory) as client:
        assert client.app.state.store.wait_ready(30)
        response = client.get("/best", params={"B": 8, "T": 1024, "op": "repkv_forward", "gpu": "h100"})
        assert response.status_code == 200, response.text
        body = response.json()
        kernel = body["answers"][0]["kernel"]
        assert body["op"] == "repkv_forward" and kernel["family"] == "replicate"
        assert kernel["name_expression"].startswith("repkv_forward_replicate<")
        assert kernel["kernel_arguments"] == variants.OPS["repkv_forward"].kernel_arguments
        assert body["answers"][0]["measured"]["speedup_vs_baseline"] == 0.30 / 0.06
        # a nearby shape of the same op: nearest, still the forward's kernel
        near = client.get("/best", params={"B": 4, "T": 1024, "op": "repkv_forward"}).json()
        assert near["answers"][0]["kernel"]["name_expression"].startswith("repkv_forward_")
        # the backward op answers from its own row alone
        back = client.get("/best", params={"B": 8, "T": 1024}).json()["answers"][0]["kernel"]
        assert back["name_expression"].startswith("repkv_vec<")
        missing = client.get("/best", params={"B": 8, "T": 1024, "op": "rope_repkv_forward"})
        assert missing.status_code == 404 and "--op rope_repkv_forward" in missing.text


def test_a_fused_ops_speed_up_is_over_its_own_naive_kernel_not_llmcs(tmp_path: Path) -> None:
    shape = variants.Shape(8, 1024, 32, 8, 128)
    rows = [
        trial("h100", shape, "bf16", "naive", {"block": 128}, 0.50, op="rope_repkv_forward"),
        trial("h100", shape, "bf16", "vec", FORWARD_VEC, 0.10, op="rope_repkv_forward"),
    ]
    directory = tmp_path / "results"
    write_table(rows, directory, "synthetic-rope")
    with client_over(directory) as client:
        assert client.app.state.store.wait_ready(30)
        fused = client.get("/dashboards", params={"op": "rope_repkv_forward"}).text
        assert "speed-up vs naive" in fused and "speed-up vs llm.c" not in fused
        plain = client.get("/dashboards").text
        assert "speed-up vs naive" not in plain
