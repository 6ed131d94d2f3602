from __future__ import annotations

import io

import pandas as pd
import pyarrow.parquet as pq
from fastapi.testclient import TestClient

from results.schema import COLUMNS


def test_json_rows_with_filters_and_limit(client: TestClient) -> None:
    body = client.get("/results", params={"gpu": "h100", "dtype": "bf16", "B": 8}).json()
    assert body["total"] == 5 and body["returned"] == 5
    assert {row["gpu"] for row in body["rows"]} == {"h100"}
    crashed = [row for row in body["rows"] if row["status"] == "crash"]
    assert crashed and crashed[0]["time_ms"] is None  # inf is null in JSON
    limited = client.get("/results", params={"limit": 2}).json()
    assert limited["returned"] == 2 and limited["total"] == 11


def test_filter_on_family_and_status(client: TestClient) -> None:
    body = client.get("/results", params={"family": "naive", "status": "ok"}).json()
    assert body["total"] == 2 and all(r["family"] == "naive" for r in body["rows"])
    assert client.get("/results", params={"gpu": "nowhere"}).json()["total"] == 0


def test_csv_export(client: TestClient) -> None:
    r = client.get("/results", params={"format": "csv", "gpu": "h100"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    assert "attachment" in r.headers["content-disposition"]
    frame = pd.read_csv(io.StringIO(r.text))
    assert list(frame.columns) == list(COLUMNS) and len(frame) == 8


def test_parquet_export_has_the_trial_schema(client: TestClient) -> None:
    r = client.get("/results", params={"format": "parquet", "T": 1024, "limit": 3})
    assert r.status_code == 200 and r.headers["content-type"] == "application/vnd.apache.parquet"
    table = pq.read_table(io.BytesIO(r.content))
    assert table.column_names == list(COLUMNS) and table.num_rows == 3


def test_bad_filters_are_422(client: TestClient) -> None:
    for params in ({"format": "xml"}, {"limit": 0}, {"limit": 10**9}, {"B": -1}, {"gpu": "x" * 100}):
        assert client.get("/results", params=params).status_code == 422, params
