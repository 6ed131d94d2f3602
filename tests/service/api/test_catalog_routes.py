from __future__ import annotations

import pytest
from fastapi.testclient import TestClient


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
