from __future__ import annotations

import asyncio
import io
import math
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient
from service_client import ready_client, write_service_rows
from trial_rows import S1, VEC16, trial

import variants
from results.schema import COLUMNS
from results.store import load_results, write_table


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


def test_a_gpu_without_rows_is_404_naming_the_gpus_with_rows(client: TestClient) -> None:
    """It was a 200 with no rows, where /shapes answered the same label with a 404."""
    r = client.get("/results", params={"gpu": "nowhere"})
    assert r.status_code == 404, r.text
    assert r.json() == {"detail": "no results for GPU 'nowhere'", "available": ["h100", "h200", "l4"]}
    assert client.get("/shapes", params={"gpu": "nowhere"}).status_code == 404
    no_match = client.get("/results", params={"gpu": "h100", "B": 3}).json()
    assert no_match["total"] == 0  # a known GPU with no matching row is still an empty page


def test_a_family_of_another_op_is_refused_naming_the_ops_families(client: TestClient) -> None:
    """It was answered with no rows, as if the op had no trials of a family it does not have."""
    r = client.get("/results", params={"op": "repkv_forward", "family": "warp_sum"})
    assert r.status_code == 422, r.text
    message = r.json()["detail"][0]["msg"]
    assert message.startswith("warp_sum is not a family of repkv_forward; its families: ")
    assert "flat" in message
    assert client.get("/results", params={"op": "repkv_backward", "family": "warp_sum"}).status_code == 200


def test_csv_export(client: TestClient) -> None:
    r = client.get("/results", params={"format": "csv", "gpu": "h100"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    assert "attachment" in r.headers["content-disposition"]
    frame = pd.read_csv(io.StringIO(r.text))
    assert list(frame.columns) == list(COLUMNS) and len(frame) == 8


def test_format_and_op_are_read_in_any_case(client: TestClient) -> None:
    # before: format=CSV and op=REPKV_BACKWARD were a 422, where gpu=H100 was read
    lower = client.get("/results", params={"format": "csv", "gpu": "h100", "op": "repkv_backward"})
    upper = client.get("/results", params={"format": "CSV", "gpu": "H100", "op": "REPKV_BACKWARD"})
    assert upper.status_code == 200 and upper.text == lower.text and len(upper.text.splitlines()) == 9


def test_parquet_export_has_the_trial_schema(client: TestClient) -> None:
    r = client.get("/results", params={"format": "parquet", "T": 1024, "limit": 3})
    assert r.status_code == 200 and r.headers["content-type"] == "application/vnd.apache.parquet"
    table = pq.read_table(io.BytesIO(r.content))
    assert table.column_names == list(COLUMNS) and table.num_rows == 3


def test_bad_filters_are_422(client: TestClient) -> None:
    for params in ({"format": "xml"}, {"limit": 0}, {"limit": 10**9}, {"B": -1}, {"gpu": "x" * 100}):
        assert client.get("/results", params=params).status_code == 422, params


# --- exports: everything asked for, streamed; pages with a total and a next link ---

BIG = 2500  # rows: beyond the 1,000 the exports used to stop at


@pytest.fixture
def big_client(tmp_path: Path) -> Iterator[TestClient]:
    rows = [
        trial("h100", S1, "bf16", "vec", VEC16, 0.1 + n * 1e-4, number=n, seed=None if n % 7 == 0 else n % 3)
        for n in range(BIG)
    ]
    write_table(rows, tmp_path / "results", "synthetic-big")
    with ready_client(tmp_path / "results") as c:
        yield c


def test_every_format_exports_every_matching_row(big_client: TestClient) -> None:
    csv = big_client.get("/results", params={"format": "csv"})
    assert len(pd.read_csv(io.StringIO(csv.text))) == BIG
    parquet = big_client.get("/results", params={"format": "parquet"})
    assert pq.read_table(io.BytesIO(parquet.content)).num_rows == BIG
    body = big_client.get("/results").json()
    assert body["total"] == body["returned"] == len(body["rows"]) == BIG and body["next"] is None
    for r in (csv, parquet):
        assert r.headers["X-Total-Count"] == str(BIG) and "Link" not in r.headers


@pytest.mark.parametrize("format", ["json", "csv", "parquet"])
def test_pages_carry_the_total_and_a_link_to_the_next(big_client: TestClient, format: str) -> None:
    url, seen, pages = f"/results?format={format}&limit=1000&status=ok", [], 0
    while url:
        r = big_client.get(url)
        assert r.status_code == 200 and r.headers["X-Total-Count"] == str(BIG)
        if format == "csv":
            frame = pd.read_csv(io.StringIO(r.text))
        elif format == "parquet":
            frame = pq.read_table(io.BytesIO(r.content)).to_pandas()
        else:
            body = r.json()
            frame = pd.DataFrame(body["rows"])
            assert body["total"] == BIG and body["returned"] == len(frame)
        seen.extend(frame["trial"])
        pages += 1
        link = r.headers.get("Link")
        if link is None:
            break
        assert link.endswith('>; rel="next"') and "status=ok" in link and "limit=1000" in link
        url = link[1 : link.index(">")]
        if format == "json":
            assert body["next"] == url
    assert pages == 3 and seen == list(range(BIG))


def test_exports_stream_in_chunks_encoded_off_the_event_loop(
    big_client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from service.api import export

    loops: list[bool] = []
    niceness: list[int] = []
    encode = export.json_rows

    def recording(table, first):
        try:
            asyncio.get_running_loop()
            loops.append(True)
        except RuntimeError:
            loops.append(False)
        if sys.platform == "linux":
            niceness.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        return encode(table, first)

    monkeypatch.setattr(export, "json_rows", recording)
    for name in ("JSON_ROWS", "CSV_ROWS", "PARQUET_ROWS"):
        monkeypatch.setattr(export, name, 1000)
    with big_client.stream("GET", "/results") as r:
        chunks = [len(chunk) for chunk in r.iter_raw()]
    assert len(loops) == 3 and not any(loops)  # 3 chunks of at most 1,000 rows, none on a loop
    # on export threads that yield to the event loop when CPU is short
    base = os.getpriority(os.PRIO_PROCESS, 0)
    assert all(n == min(19, base + export.NICENESS) for n in niceness)
    assert len(chunks) >= 3 and max(chunks) < sum(chunks) / 2
    for format in ("csv", "parquet"):
        with big_client.stream("GET", "/results", params={"format": format}) as r:
            assert len(list(r.iter_raw())) >= 2


def test_integer_columns_stay_integers(big_client: TestClient) -> None:
    text = big_client.get("/results", params={"format": "csv", "limit": 8}).text
    columns = [c.strip('"') for c in text.splitlines()[0].split(",")]
    frame = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    assert list(frame["trial"]) == [str(n) for n in range(8)]
    assert list(frame["seed"]) == ["", "1", "2", "0", "1", "2", "0", ""]  # null is empty
    for column in ("grid", "block", "B", "sm_count", "reps", "bytes_moved", "schema_version"):
        assert all("." not in v for v in frame[column]), (column, list(frame[column]))
    assert columns == list(COLUMNS)
    rows = big_client.get("/results", params={"limit": 8}).json()["rows"]
    assert [r["seed"] for r in rows] == [None, 1, 2, 0, 1, 2, 0, None]
    assert all(isinstance(r["trial"], int) and isinstance(r["grid"], int) for r in rows)
    table = pq.read_table(io.BytesIO(big_client.get("/results", params={"format": "parquet"}).content))
    assert table.schema.field("seed").type == pa.int64() and table.schema.field("trial").type == pa.int32()


def test_json_rows_read_back_as_the_stored_values(client: TestClient, served_dir: Path) -> None:
    frame, _ = load_results(served_dir)
    rows = client.get("/results").json()["rows"]
    assert len(rows) == len(frame)
    for row, (_, stored) in zip(rows, frame.iterrows(), strict=True):
        for column in COLUMNS:
            value = stored[column]
            if column == "timestamp":
                assert row[column] == value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            elif isinstance(value, float) and not math.isfinite(value):
                assert row[column] is None  # inf and NaN are null in JSON
            else:
                assert row[column] == value, column


def test_strings_are_escaped_in_json(tmp_path: Path) -> None:
    odd = 'quote " backslash \\ newline \n tab \t bell \x07 é ✓'
    write_table([trial("h100", S1, "bf16", "vec", VEC16, 0.1, message=odd)], tmp_path, "synthetic-odd")
    with ready_client(tmp_path) as c:
        assert c.get("/results").json()["rows"][0]["message"] == odd


def test_an_empty_selection_is_a_valid_empty_export(client: TestClient) -> None:
    params = {"gpu": "h100", "B": 3}
    assert client.get("/results", params=params).json() == {
        "total": 0,
        "returned": 0,
        "offset": 0,
        "next": None,
        "rows": [],
    }
    csv = client.get("/results", params={**params, "format": "csv"}).text
    assert [c.strip('"') for c in csv.strip().split(",")] == list(COLUMNS)
    parquet = client.get("/results", params={**params, "format": "parquet"}).content
    assert pq.read_table(io.BytesIO(parquet)).num_rows == 0


@pytest.mark.parametrize(
    ("field", "value", "accepted"),
    [("status", "succeeded", "wrong_result"), ("family", "fast", "warp_per_head"), ("dtype", "int8", "bf16")],
)
def test_an_unknown_name_is_422_naming_the_accepted_ones(
    client: TestClient, field: str, value: str, accepted: str
) -> None:
    r = client.get("/results", params={field: value})
    assert r.status_code == 422, r.text
    error = r.json()["detail"][0]
    assert error["loc"][-1] == field and accepted in error["msg"]


def test_the_next_link_never_echoes_the_clients_host(big_client: TestClient) -> None:
    # before: Link and `next` were absolute URLs built from the request's Host header
    r = big_client.get("/results?limit=10&status=ok", headers={"Host": "attacker.example"})
    link, body = r.headers["Link"], r.json()
    assert "attacker.example" not in link and "attacker.example" not in body["next"]
    assert link == '</results?limit=10&status=ok&offset=10>; rel="next"' and body["next"] == link[1:-13]
    assert big_client.get(body["next"]).json()["offset"] == 10


# --- op: every row names its op; `op` keeps one op's rows ---

FORWARD_VEC = {"block": 256, "vec_bytes": 16, "load": "ldg", "store": "stcs"}


@pytest.fixture(scope="module")
def ops_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """The service tests' (repkv backward) rows, and two of repkv forward, one a vec like the
    backward ones."""
    rows = [
        trial("h100", S1, "bf16", "vec", FORWARD_VEC, 0.07, op="repkv_forward", number=0),
        trial("h100", S1, "bf16", "replicate", {**FORWARD_VEC, "block": 128}, 0.06, op="repkv_forward"),
    ]
    store_dir = write_service_rows(tmp_path_factory.mktemp("ops") / "results")
    write_table(rows, store_dir, "synthetic-forward")
    with ready_client(store_dir) as client:
        yield client


def test_the_op_filter_keeps_one_ops_rows(ops_client: TestClient) -> None:
    every = ops_client.get("/results").json()
    assert every["total"] == 13
    assert {row["op"] for row in every["rows"]} == {"repkv_backward", "repkv_forward"}
    forward = ops_client.get("/results", params={"op": "repkv_forward"}).json()
    assert forward["total"] == 2 and {row["op"] for row in forward["rows"]} == {"repkv_forward"}
    backward = ops_client.get("/results", params={"op": "repkv_backward"}).json()
    assert backward["total"] == 11 and {row["op"] for row in backward["rows"]} == {"repkv_backward"}
    # family names repeat across ops: op tells them apart
    vec = ops_client.get("/results", params={"family": "vec", "op": "repkv_forward"}).json()
    assert vec["total"] == 1 and vec["rows"][0]["time_ms"] == pytest.approx(0.07)
    assert ops_client.get("/results", params={"family": "vec"}).json()["total"] == 4
    # a family of another op than the default is a name /results knows
    assert ops_client.get("/results", params={"family": "replicate"}).json()["total"] == 1


def test_every_format_carries_the_op_column(ops_client: TestClient) -> None:
    params = {"op": "repkv_forward"}
    csv = pd.read_csv(io.StringIO(ops_client.get("/results", params={**params, "format": "csv"}).text))
    assert "op" in csv.columns and set(csv["op"]) == {"repkv_forward"} and len(csv) == 2
    parquet = ops_client.get("/results", params={**params, "format": "parquet"}).content
    table = pq.read_table(io.BytesIO(parquet))
    assert table.column("op").to_pylist() == ["repkv_forward"] * 2
    rows = ops_client.get("/results", params=params).json()["rows"]
    assert [row["op"] for row in rows] == ["repkv_forward"] * 2


def test_an_unknown_op_is_422_naming_the_ops(client: TestClient) -> None:
    r = client.get("/results", params={"op": "rope"})
    assert r.status_code == 422
    error = r.json()["detail"][0]
    assert error["loc"][-1] == "op" and all(f"'{op}'" in error["msg"] for op in variants.OPS)
