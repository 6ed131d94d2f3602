from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from service_client import ready_client, write_service_rows
from trial_rows import S1, S2, trial

import variants
from results.store import write_table


def test_gpus(client: TestClient) -> None:
    gpus = {g["label"]: g for g in client.get("/gpus").json()}
    assert set(gpus) == {"h100", "h200", "l4"}
    assert gpus["h100"]["trials"] == 8 and gpus["h100"]["ok_trials"] == 6
    assert gpus["h100"]["tuned"] == 3 and gpus["h100"]["dtypes"] == ["bf16", "fp32"]
    assert gpus["h100"]["gpu_names"] == ["SYNTHETIC H100"] and gpus["h100"]["sm_count"] == 132


def test_shapes(client: TestClient) -> None:
    shapes = client.get("/shapes", params={"gpu": "h100", "dtype": "bf16"}).json()
    assert len(shapes) == 2
    s1 = next(s for s in shapes if s["shape"]["B"] == 8)
    assert s1["best_config"].startswith("split[") and s1["trials"] == 5 and s1["configurations"] == 3
    assert s1["speedup_vs_baseline"] == pytest.approx(0.70 / 0.09)
    assert client.get("/shapes", params={"gpu": "nope"}).status_code == 404


def test_openapi_documents_the_defaults(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    params = {p["name"]: p for p in spec["paths"]["/best"]["get"]["parameters"]}
    assert params["NH"]["schema"]["default"] == 32 and params["dtype"]["schema"]["default"] == "bf16"
    assert client.get("/docs").status_code == 200


@pytest.mark.parametrize("url", ["/shapes?dtype=fp8", "/results?dtype=fp8", "/best?B=8&T=1024&dtype=fp8"])
def test_an_unknown_dtype_is_422_on_every_route(client: TestClient, url: str) -> None:
    # before: /shapes?dtype=fp8 answered 200 [] where /best and /results answered 422
    r = client.get(url)
    assert r.status_code == 422, r.text
    (error,) = r.json()["detail"]
    assert error["loc"] == ["query", "dtype"] and "'bf16'" in error["msg"]


def test_shapes_reads_gpu_and_dtype_in_any_case(client: TestClient) -> None:
    lower = client.get("/shapes", params={"gpu": "h100", "dtype": "bf16"}).json()
    assert client.get("/shapes", params={"gpu": "H100", "dtype": "BF16"}).json() == lower != []


def test_openapi_declares_every_dtype_parameter_as_the_enum(client: TestClient) -> None:
    # before: any string of 1-16 characters
    spec = client.get("/openapi.json").json()
    found = 0
    for path, operations in spec["paths"].items():
        for parameter in operations.get("get", {}).get("parameters", []):
            if parameter["name"] == "dtype":
                schema = parameter["schema"]
                options = [s for s in schema.get("anyOf", [schema]) if s.get("type") != "null"]
                assert [o.get("enum") for o in options] == [["fp32", "bf16", "fp16"]], path
                found += 1
    assert found >= 6  # /best, /shapes, /results and the dashboards that take one


# --- op: each listing is of one op (default repkv_backward), and says which ---

FORWARD_VEC = {"block": 256, "vec_bytes": 16, "load": "ldg", "store": "stcs"}


@pytest.fixture(scope="module")
def ops_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """The service tests' (repkv backward) rows, and repkv forward's on h100 (S1 and S2, bf16)
    and on a GPU that tuned nothing else (a100)."""
    rows = [
        trial("h100", S1, "bf16", "vec", FORWARD_VEC, 0.07, op="repkv_forward", number=0),
        trial("h100", S1, "bf16", "naive", {"block": 128}, 0.30, op="repkv_forward", number=1),
        trial("h100", S2, "bf16", "vec", FORWARD_VEC, 0.02, op="repkv_forward", number=0),
        trial("a100", S1, "bf16", "vec", FORWARD_VEC, 0.09, op="repkv_forward", number=0),
    ]
    store_dir = write_service_rows(tmp_path_factory.mktemp("ops") / "results")
    write_table(rows, store_dir, "synthetic-forward")
    with ready_client(store_dir) as client:
        yield client


def test_gpus_of_one_op(ops_client: TestClient) -> None:
    backward = {g["label"]: g for g in ops_client.get("/gpus").json()}
    assert set(backward) == {"h100", "h200", "l4"} and {g["op"] for g in backward.values()} == {
        "repkv_backward"
    }
    assert backward["h100"]["trials"] == 8 and backward["h100"]["tuned"] == 3  # its backward rows alone
    assert ops_client.get("/gpus", params={"op": "repkv_backward"}).json() == list(backward.values())
    forward = {g["label"]: g for g in ops_client.get("/gpus", params={"op": "repkv_forward"}).json()}
    assert set(forward) == {"a100", "h100"} and {g["op"] for g in forward.values()} == {"repkv_forward"}
    assert forward["h100"]["trials"] == 3 and forward["h100"]["tuned"] == 2
    assert forward["h100"]["dtypes"] == ["bf16"]
    assert ops_client.get("/gpus", params={"op": "rope_repkv_forward"}).json() == []


def test_shapes_of_one_op(ops_client: TestClient) -> None:
    backward = ops_client.get("/shapes", params={"gpu": "h100"}).json()
    assert len(backward) == 3 and {s["op"] for s in backward} == {"repkv_backward"}
    forward = ops_client.get("/shapes", params={"gpu": "h100", "op": "repkv_forward"}).json()
    assert {s["op"] for s in forward} == {"repkv_forward"}
    by_b = {s["shape"]["B"]: s for s in forward}
    assert set(by_b) == {1, 8} and by_b[8]["best_config"].startswith("vec[") and by_b[8]["trials"] == 2
    assert by_b[8]["best_time_ms"] == pytest.approx(0.07)
    assert by_b[8]["speedup_vs_baseline"] == pytest.approx(0.30 / 0.07)
    # a GPU with rows of other ops alone: none of this one
    r = ops_client.get("/shapes", params={"gpu": "l4", "op": "repkv_forward"})
    assert r.status_code == 404 and "repkv_forward" in r.json()["detail"]
    assert r.json()["available"] == ["a100", "h100"]
    assert ops_client.get("/shapes", params={"op": "rope_repkv_forward"}).json() == []


def test_rule_quality_of_one_op(ops_client: TestClient) -> None:
    forward = ops_client.get("/rule-quality", params={"op": "repkv_forward"}).json()
    assert {q["gpu"] for q in forward} == {"a100", "h100"} and {q["op"] for q in forward} == {"repkv_forward"}
    # h100's two repkv_forward groups: one is vec alone where four families serve (partial), not held out
    assert next(q for q in forward if q["gpu"] == "h100")["tuned"] == 1
    backward = ops_client.get("/rule-quality").json()
    assert {q["gpu"] for q in backward} == {"h100", "h200", "l4"}
    assert {q["op"] for q in backward} == {"repkv_backward"}


@pytest.mark.parametrize("path", ["/gpus", "/shapes", "/rule-quality"])
def test_an_unknown_op_is_422_on_every_listing(client: TestClient, path: str) -> None:
    r = client.get(path, params={"op": "rope"})
    assert r.status_code == 422
    (error,) = r.json()["detail"]
    assert error["loc"] == ["query", "op"] and all(f"'{op}'" in error["msg"] for op in variants.OPS)
