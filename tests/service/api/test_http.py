"""HTTP behaviour across routes: HEAD, compression, the documentation pages without internet."""

from __future__ import annotations

import io
import re

import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

import variants

GET_ROUTES = [
    "/best?B=8&T=1024",
    "/best?B=8&T=1024&gpu=h100",
    "/gpus",
    "/shapes",
    "/results",
    "/results?format=csv",
    "/results?format=parquet",
    "/healthz",
    "/readyz",
    "/dashboards",
    "/dashboards/shape?gpu=h100&B=8&T=1024",
    "/static/plotly.min.js",
    "/docs",
    "/redoc",
    "/openapi.json",
]


@pytest.mark.parametrize("url", GET_ROUTES)
def test_head_answers_wherever_get_does(client: TestClient, url: str) -> None:
    get = client.get(url)
    head = client.head(url)
    assert head.status_code == get.status_code == 200, head.text
    assert head.content == b""
    assert head.headers["content-type"] == get.headers["content-type"]
    if "content-length" in get.headers:
        assert head.headers["content-length"] == get.headers["content-length"]


def test_head_of_an_export_has_its_count_and_next_link(client: TestClient) -> None:
    r = client.head("/results", params={"format": "csv", "limit": 2})
    assert r.status_code == 200 and r.content == b""
    assert r.headers["X-Total-Count"] == "11" and 'rel="next"' in r.headers["Link"]
    assert client.head("/best", params={"B": 8, "T": 1024, "gpu": "v100"}).status_code == 404
    assert client.head("/nowhere").status_code == 404


def test_large_responses_are_compressed_for_clients_that_accept_it(client: TestClient) -> None:
    plotly = client.get("/static/plotly.min.js", headers={"Accept-Encoding": "gzip"})
    assert plotly.headers["content-encoding"] == "gzip"
    assert plotly.num_bytes_downloaded < 2_000_000 < len(plotly.content)  # 4.8 MB uncompressed
    csv = client.get("/results", params={"format": "csv"}, headers={"Accept-Encoding": "gzip"})
    assert csv.headers["content-encoding"] == "gzip"
    plain = client.get("/results", params={"format": "csv"}, headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers and csv.text == plain.text  # httpx decodes it


def test_parquet_is_not_compressed_twice(client: TestClient) -> None:
    r = client.get("/results", params={"format": "parquet"}, headers={"Accept-Encoding": "gzip"})
    assert "content-encoding" not in r.headers
    assert pq.read_table(io.BytesIO(r.content)).num_rows == 11


def test_small_answers_are_sent_as_they_are(client: TestClient) -> None:
    r = client.get("/healthz", headers={"Accept-Encoding": "gzip"})
    assert "content-encoding" not in r.headers


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_documentation_pages_need_no_internet(client: TestClient, page: str) -> None:
    html = client.get(page).text
    assert "http://" not in html and "https://" not in html, html
    assets = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert assets
    for url in assets:
        r = client.get(url)
        assert r.status_code == 200 and len(r.content) > 0, url
    assert client.get("/openapi.json").json()["openapi"].startswith("3.1")


def test_the_redoc_bundle_served_fetches_nothing_from_a_cdn(client: TestClient) -> None:
    """ReDoc's bundle loads its logo from cdn.redoc.ly: offline, a failed request and a console
    error on /redoc."""
    from service.api.routes.docs import ASSETS_DIR, REDOC_LOGO

    assert REDOC_LOGO in (ASSETS_DIR / "redoc.standalone.js").read_bytes()  # what is replaced is there
    served = client.get("/static/docs/redoc.standalone.js").content
    assert b"cdn.redoc.ly" not in served and b"data:image/gif;base64," in served


def test_the_api_description_names_every_op_it_serves(client: TestClient) -> None:
    description = client.get("/openapi.json").json()["info"]["description"]
    for op in variants.OPS:
        assert f"`{op}`" in description, op


def test_the_swagger_ui_served_reads_openapi_3_1(client: TestClient) -> None:
    bundle = client.get("/static/docs/swagger-ui-bundle.js", headers={"Accept-Encoding": "gzip"})
    assert bundle.headers["content-type"].startswith("text/javascript")
    assert bundle.headers["content-encoding"] == "gzip"
    assert b"isOAS31" in bundle.content  # Swagger UI 5: renders the OpenAPI 3.1 that FastAPI writes
    assert client.get("/static/docs/../../etc/passwd").status_code == 404
    assert client.get("/static/docs/index.html").status_code == 404
