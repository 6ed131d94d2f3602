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
