"""A dashboard page asked with a bad parameter answers with an HTML page naming it, with the
status a JSON client would get (422), not with FastAPI's JSON."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("/dashboards?dtype=fp8", "dtype"),
        ("/dashboards/shape?B=0&T=1024", "B"),
        ("/dashboards/shape?B=8", "T"),
        ("/dashboards/shape?B=8&T=1024&NH=30&NH_KV=8", "NH_KV"),
        ("/dashboards/shape?B=16777216&T=16777216", "B"),
        ("/dashboards/gpus?B=8&T=1024&dtype=int8", "dtype"),
        ("/dashboards/bandwidth?gpu=" + "g" * 65, "gpu"),
        ("/dashboards/shape?B=8&T=1024&HD=127&op=rope_repkv_forward", "HD"),  # RoPE rotates pairs
        ("/dashboards/gpus?B=8&T=1024&HD=127&op=repkv_rope_backward", "HD"),
    ],
)
def test_a_bad_parameter_gets_an_html_error_page(client: TestClient, url: str, named: str) -> None:
    r = client.get(url)
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith("text/html")
    assert "<title>Invalid request" in r.text and f"<code>{named}</code>" in r.text
    assert 'href="/dashboards' in r.text  # a way back


@pytest.mark.parametrize(
    "url",
    [
        "/dashboards/shape?B=8&T=1024&NH=30&op=repkv_forward",
        "/dashboards/shape?B=8&T=1024&HD=127&op=rope_repkv_forward",
        "/dashboards/bandwidth?gpu=H%20200&op=repkv_forward",
    ],
)
def test_the_error_page_keeps_the_op_asked_for(client: TestClient, url: str) -> None:
    """Its way back and its navigation stay on that op, as every other page's do."""
    r = client.get(url)
    assert r.status_code == 422, r.text
    op = url.rsplit("op=", 1)[1]
    assert f'href="/dashboards?op={op}"' in r.text and f'href="/dashboards/bandwidth?op={op}"' in r.text
    assert 'href="/dashboards"' not in r.text
    # an unknown op, or one given twice, is the problem named: the links go to the default op
    for bad in ("/dashboards?op=nope", "/dashboards?op=repkv_forward&op=repkv_rope_backward"):
        r = client.get(bad)
        assert r.status_code == 422 and 'href="/dashboards"' in r.text and "<code>op</code>" in r.text


def test_the_api_keeps_its_json_errors(client: TestClient) -> None:
    r = client.get("/best", params={"B": 0, "T": 1024})
    assert r.status_code == 422 and r.headers["content-type"] == "application/json"


def test_openapi_says_a_dashboards_422_is_html(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    for path in ("/dashboards", "/dashboards/shape", "/dashboards/gpus", "/dashboards/bandwidth"):
        assert list(spec["paths"][path]["get"]["responses"]["422"]["content"]) == ["text/html"], path
