"""The dashboards' pages over a small store: the overview, the GPU and bandwidth pages, 404s, plotly.js."""

from __future__ import annotations

from pathlib import Path

from dashboard_page_helpers import (
    hrefs,
    labelled_lines,
    picker_options,
    specs,
    values,  # noqa: F401  (test_dashboard_ops.py imports it from here)
)
from fastapi.testclient import TestClient
from service_client import ready_client
from trial_rows import S1, VEC16, h100_rows, other_rows, trial

import variants
from results.store import write_table
from service.dashboards import draw


def test_overview_page(client: TestClient) -> None:
    r = client.get("/dashboards")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert '<script src="/static/plotly.min.js">' in r.text and "cdn" not in r.text.lower()
    figures = specs(r.text)
    assert len(figures) == 3 and all(f["data"] for f in figures)
    assert "/dashboards/shape?gpu=h100" in r.text


def test_overview_board_names_each_winner_by_family_beside_its_peak_and_copy(client: TestClient) -> None:
    board, _speedup, families = specs(client.get("/dashboards").text)
    cells = board["data"][0]
    assert cells["type"] == "heatmap" and cells["texttemplate"] == "%{text}"
    named = {
        (shape, column): text
        for shape, line in zip(cells["y"], cells["text"], strict=True)
        for column, text in zip(cells["x"], line, strict=True)
        if text
    }
    assert len(named) == 6  # every winner of the table, by family
    h100 = next(c for c in cells["x"] if "h100" in c and "bf16" in c)
    assert named[("8×1024 32/8/128", h100)] == "split"
    hover = cells["hovertext"][cells["y"].index("8×1024 32/8/128")][cells["x"].index(h100)]
    assert "<b>split</b>" in hover and "items=4" in hover and "0.0900 ms" in hover  # its parameters
    legend = [t["name"] for t in board["data"] if t.get("legendgroup") == "family"]
    assert legend == [f for f in variants.FAMILIES if f in set(named.values())]
    layout = board["layout"]
    assert layout["xaxis2"]["title"]["text"] == "% of HBM peak" and layout["xaxis2"]["range"] == [0, 105]
    assert layout["xaxis3"]["range"][0] == 0  # bars and dots of time / copy from 0...
    (line,) = [s for s in layout["shapes"] if s.get("name") == "device copy = 1"]
    assert line["x0"] == line["x1"] == 1.0 and line["xref"] == "x3"  # ...with the copy's line at 1
    assert "<b>1 = copy</b>" in layout["xaxis3"]["ticktext"]
    peak = [t for t in board["data"] if t.get("xaxis") == "x2"]
    ratio = [t for t in board["data"] if t.get("xaxis") == "x3"]
    assert (
        [t["name"] for t in peak]
        == [t["name"] for t in ratio]
        == ["h100 fp32", "h100 bf16", "h200 bf16", "l4 bf16"]
    )
    assert families["data"][0]["type"] == "heatmap"


def test_overview_links_every_winner_to_its_recipe_and_source(client: TestClient) -> None:
    text = client.get("/dashboards").text
    links = hrefs(text)
    rows = text.count("<tr>") - 1
    recipes = [h for h in links if h.startswith("/best?")]
    assert len(recipes) == rows == 6
    assert "/best?gpu=h100&B=8&T=1024&NH=32&NH_KV=8&HD=128&dtype=bf16" in recipes
    assert f"/kernels/{variants.get_family('split').source_hash}" in links
    assert len([h for h in links if h.startswith("/kernels/")]) == rows


def test_recipe_and_source_links_answer(client: TestClient) -> None:
    links = hrefs(client.get("/dashboards").text)
    for href in {h for h in links if h.startswith(("/best?", "/kernels/", "/dashboards"))}:
        assert client.get(href).status_code == 200, href


def test_overview_filters_by_gpu_and_dtype(client: TestClient) -> None:
    text = client.get("/dashboards", params={"gpu": "h100", "dtype": "bf16"}).text
    assert text.count("<tr>") - 1 == 2
    gpu_options = picker_options(text, "gpu")
    assert gpu_options[0] == ("all GPUs", "/dashboards?dtype=bf16", False)
    assert ("h100", "/dashboards?gpu=h100&dtype=bf16", True) in gpu_options
    assert ("fp32", "/dashboards?gpu=h100&dtype=fp32", False) in picker_options(text, "dtype")
    assert client.get("/dashboards", params={"dtype": "int3"}).status_code == 422
    assert client.get("/dashboards", params={"gpu": "nope"}).status_code == 404


def test_gpus_page(client: TestClient) -> None:
    r = client.get("/dashboards/gpus", params={"B": 8, "T": 1024})
    assert r.status_code == 200 and len(specs(r.text)) == 2
    assert len(picker_options(r.text, "shape")) == 2 and len(picker_options(r.text, "dtype")) == 3
    assert len([h for h in hrefs(r.text) if h.startswith("/best?")]) == 3


def test_bandwidth_page(client: TestClient) -> None:
    r = client.get("/dashboards/bandwidth", params={"gpu": "h100"})
    assert r.status_code == 200
    gbps, ratio = specs(r.text)
    assert gbps["layout"]["xaxis"]["type"] == "log"
    names = [t["name"] for t in gbps["data"]]
    assert names[:2] == ["llm.c kernel1, block 128", "device copy (same bytes, same process)"]
    assert "winner bf16" in names and "winner fp32" in names
    assert labelled_lines(gbps) == []  # a synthetic device: no known peak, no line
    assert "No peak bandwidth is known" in r.text
    assert labelled_lines(ratio) == [(1.0, 1.0)]
    assert len([h for h in hrefs(r.text) if h.startswith("/best?")]) == 3
    pick = client.get("/dashboards/bandwidth")  # three GPUs: the reader picks
    assert pick.status_code == 200 and "/dashboards/bandwidth?gpu=l4" in hrefs(pick.text)
    assert client.get("/dashboards/bandwidth", params={"gpu": "nope"}).status_code == 404


def test_the_overview_pages_its_shapes_so_that_each_board_fits_one_screen(tmp_path: Path) -> None:
    per_page = draw.BOARD_SHAPES
    shapes = [variants.Shape(1, 16 * (n + 1), 32, 8, 128) for n in range(per_page + 3)]
    rows = [trial("h100", shape, "bf16", "vec", VEC16, 0.01 * (n + 1)) for n, shape in enumerate(shapes)]
    write_table(rows, tmp_path, "synthetic-many")
    with ready_client(tmp_path) as c:
        first = c.get("/dashboards")
        assert first.status_code == 200
        assert f"Shapes 1-{per_page} of {per_page + 3}, smallest first" in first.text
        assert "/dashboards?page=2" in hrefs(first.text)
        board = specs(first.text)[0]["data"][0]
        assert len(board["y"]) == per_page  # the first per_page shapes, smallest first
        assert first.text.count("/best?") == per_page  # the winners table: the same shapes
        assert len(specs(first.text)[2]["data"][0]["y"]) == per_page  # family against family too
        second = c.get("/dashboards", params={"page": 2})
        assert second.status_code == 200 and f"Shapes {per_page + 1}-{per_page + 3} of" in second.text
        assert len(specs(second.text)[0]["data"][0]["y"]) == 3
        assert len(specs(second.text)[2]["data"][0]["y"]) == 3
        assert "/dashboards" in hrefs(second.text)  # back to page 1
        past = c.get("/dashboards", params={"page": 3})
        assert past.status_code == 404 and "There are 2 pages of shapes, not 3." in past.text
        assert c.get("/dashboards", params={"page": 0}).status_code == 422
        one = c.get("/dashboards", params={"dtype": "fp32", "page": 2})  # no fp32 rows: one page
        assert one.status_code == 404 and "There is 1 page of shapes, not 2." in one.text


def test_bandwidth_page_draws_the_peak_of_a_known_gpu(tmp_path: Path) -> None:
    rows = [{**row, "gpu_name": "NVIDIA H200"} for row in other_rows() if row["gpu"] == "h200"]
    write_table(rows, tmp_path, "synthetic-h200")
    with ready_client(tmp_path) as c:
        gbps = specs(c.get("/dashboards/bandwidth").text)[0]
        assert labelled_lines(gbps) == [(4800.0, 4800.0)]
        assert "4.80 TB/s" in gbps["layout"]["annotations"][0]["text"]


def test_unknown_dashboards_are_html_404(client: TestClient) -> None:
    r = client.get("/dashboards/shape", params={"gpu": "<b>x</b>", "B": 8, "T": 1024})  # not a label
    assert r.status_code == 422 and "<b>x</b>" not in r.text and "&lt;b&gt;" in r.text
    r = client.get("/dashboards/shape", params={"gpu": "nowhere", "B": 8, "T": 1024})
    assert r.status_code == 404 and "text/html" in r.headers["content-type"]


def test_gpus_page_of_a_shape_no_gpu_tuned_shows_what_best_serves_each_gpu(client: TestClient) -> None:
    r = client.get("/dashboards/gpus", params={"B": 3, "T": 3})
    assert r.status_code == 200 and "No GPU tuned this shape and dtype." in r.text
    gpus = [row["label"] for row in client.get("/gpus").json()]
    assert len(gpus) > 1
    for gpu in gpus:
        (best,) = client.get("/best", params={"gpu": gpu, "B": 3, "T": 3}).json()["answers"]
        assert best["match"] == "nearest"
        assert f"<code>{best['kernel']['config_key']}</code>" in r.text
        assert f"/dashboards/shape?gpu={gpu}&amp;B=3&amp;T=3" in r.text
    # the shape picker shows the shape asked for, not the first tuned one
    shapes = picker_options(r.text, "shape")
    assert shapes[0] == (f"{variants.Shape(3, 3, 32, 8, 128)} (not tuned)", shapes[0][1], True)
    assert [s for s in shapes if s[2]] == shapes[:1] and "B=3&T=3" in shapes[0][1]


def test_plotly_js_is_served_locally(client: TestClient) -> None:
    r = client.get("/static/plotly.min.js")
    assert r.status_code == 200 and "javascript" in r.headers["content-type"] and len(r.content) > 1_000_000
    assert client.get("/", follow_redirects=False).headers["location"] == "/dashboards"


def test_the_overview_lists_the_configurations_tuned_fed_apart_with_their_fed_recipes(tmp_path: Path) -> None:
    rows = [
        *h100_rows(),
        trial("h100", S1, "bf16", "vec", VEC16, 0.0431, number=20, l2="fed"),
    ]
    write_table(rows, tmp_path, "run")
    with ready_client(tmp_path) as client:
        text = client.get("/dashboards").text
        fp32 = client.get("/dashboards", params={"dtype": "fp32"}).text
        fed_recipe = "/best?gpu=h100&B=8&T=1024&NH=32&NH_KV=8&HD=128&dtype=bf16&l2=fed"
        assert fed_recipe in hrefs(text)
        answer = client.get(fed_recipe).json()["answers"][0]
    winners, fed = text.split('<h2 id="fed">')
    assert "0.0431" not in winners and "0.0431" in fed and fed.count("<tr>") == 2  # head + one row
    assert (answer["l2"], answer["kernel"]["family"]) == ("fed", "vec")
    assert 'id="fed"' not in fp32  # nothing of that dtype was tuned fed
