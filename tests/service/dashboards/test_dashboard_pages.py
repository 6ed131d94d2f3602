from __future__ import annotations

import json
import re

from fastapi.testclient import TestClient


def specs(html: str) -> list[dict]:
    found = re.findall(r'<script type="application/json" id="spec-\d+">(.*?)</script>', html, re.S)
    return [json.loads(text) for text in found]


def test_overview_page(client: TestClient) -> None:
    r = client.get("/dashboards")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert '<script src="/static/plotly.min.js">' in r.text and "cdn" not in r.text.lower()
    figures = specs(r.text)
    assert len(figures) == 2 and all(f["data"] for f in figures)
    assert "/dashboards/shape?gpu=h100" in r.text


def test_shape_page_has_heatmap_scatter_and_convergence(client: TestClient) -> None:
    r = client.get("/dashboards/shape", params={"gpu": "h100", "B": 8, "T": 1024})
    assert r.status_code == 200
    kinds = [[trace["type"] for trace in f["data"]] for f in specs(r.text)]
    assert kinds[0] == ["heatmap"] and set(kinds[1]) == {"scatter"} and set(kinds[2]) == {"scatter"}


def test_gpus_page(client: TestClient) -> None:
    r = client.get("/dashboards/gpus", params={"B": 8, "T": 1024})
    assert r.status_code == 200 and len(specs(r.text)) == 2


def test_unknown_dashboards_are_html_404(client: TestClient) -> None:
    r = client.get("/dashboards/shape", params={"gpu": "<b>x</b>", "B": 8, "T": 1024})
    assert r.status_code == 404 and "<b>x</b>" not in r.text and "&lt;b&gt;" in r.text
    assert client.get("/dashboards/gpus", params={"B": 3, "T": 3}).status_code == 404


def test_plotly_js_is_served_locally(client: TestClient) -> None:
    r = client.get("/static/plotly.min.js")
    assert r.status_code == 200 and "javascript" in r.headers["content-type"] and len(r.content) > 1_000_000
    assert client.get("/", follow_redirects=False).headers["location"] == "/dashboards"
