from __future__ import annotations

import base64
import html
import json
import math
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import S1, VEC16, h100_rows, make_client, other_rows, trial
from fastapi.testclient import TestClient

import results.store
import variants
from results.schema import COLUMNS, SCHEMA_VERSION
from results.store import write_table
from service.dashboards import draw, pages

SHAPE = {"B": 8, "T": 1024, "NH": 32, "NH_KV": 8, "HD": 128}


def specs(html: str) -> list[dict]:
    found = re.findall(r'<script type="application/json" id="spec-\d+">(.*?)</script>', html, re.S)
    return [json.loads(text) for text in found]


def values(array: object) -> list:
    """A trace's array as plotly's JSON carries it: a list, or typed bytes in base64."""
    if isinstance(array, dict) and "bdata" in array:
        return np.frombuffer(base64.b64decode(array["bdata"]), dtype=np.dtype(array["dtype"])).tolist()
    return list(array)


def hrefs(html: str) -> list[str]:
    return [h.replace("&amp;", "&") for h in re.findall(r'href="([^"]+)"', html)]


def picker_options(html: str, name: str) -> list[tuple[str, str, bool]]:
    """(text, url, selected) of one picker's options."""
    block = re.search(rf'<select name="{name}".*?</select>', html, re.S)
    assert block, f"no {name} picker"
    options = re.findall(r'<option value="([^"]*)"( selected)?>([^<]*)</option>', block.group(0))
    return [(text, value.replace("&amp;", "&"), bool(sel)) for value, sel, text in options]


def labelled_lines(figure: dict) -> list[tuple[float, float]]:
    """(line y, label y) of each reference line, in the axis' own units (log10 on log axes)."""
    layout = figure["layout"]
    log = layout.get("yaxis", {}).get("type") == "log"
    lines = {s["name"]: s["y0"] for s in layout.get("shapes", []) if s.get("name")}
    return [
        (math.log10(lines[a["name"]]) if log else lines[a["name"]], a["y"])
        for a in layout.get("annotations", [])
        if a.get("name") in lines
    ]


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


def test_one_colour_per_gpu_in_the_same_order_on_every_page(client: TestClient) -> None:
    colour = dict(zip(["h100", "h200", "l4"], draw.GPU_COLORS, strict=False))
    board, speedup, _ = specs(client.get("/dashboards").text)
    for trace in board["data"]:
        if trace.get("xaxis") in ("x2", "x3"):
            assert trace["marker"]["color"] == colour[trace["name"].split()[0]], trace["name"]
    bars = {t["name"]: t["marker"]["color"] for t in speedup["data"]}
    assert bars == colour and [t["name"] for t in speedup["data"]][:3] == ["h100", "h200", "l4"]
    l4 = specs(client.get("/dashboards", params={"gpu": "l4"}).text)[0]  # l4 alone: still its colour
    assert {t["marker"]["color"] for t in l4["data"] if t.get("xaxis") == "x2"} == {colour["l4"]}
    gbps, _ = specs(client.get("/dashboards/bandwidth", params={"gpu": "l4"}).text)
    assert {t["marker"]["color"] for t in gbps["data"] if t["name"].startswith("winner")} == {colour["l4"]}
    winners, families = specs(client.get("/dashboards/gpus", params=SHAPE).text)
    for figure in (winners, families):
        axis = figure["layout"]["yaxis" if figure is winners else "xaxis"]
        assert axis["categoryarray"] == ["h100", "h200", "l4"]
        labels = zip(axis["tickvals"], axis["ticktext"], strict=True)
        assert all(colour[gpu] in text for gpu, text in labels)


def test_every_time_over_copy_axis_starts_at_zero(client: TestClient) -> None:
    board = specs(client.get("/dashboards").text)[0]
    _, ratio = specs(client.get("/dashboards/bandwidth", params={"gpu": "h100"}).text)
    winners, _ = specs(client.get("/dashboards/gpus", params=SHAPE).text)
    for axis in (board["layout"]["xaxis3"], ratio["layout"]["yaxis"], winners["layout"]["xaxis2"]):
        low, high = axis["range"]
        assert low == 0 and high >= 1.25


def fonts(node: object, path: str = "") -> list[tuple[str, float]]:
    """Every font size a figure spec sets, with where."""
    found = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "size" and "font" in path.rsplit("/", 1)[-1] and isinstance(value, (int, float)):
                found.append((path, float(value)))
            found += fonts(value, f"{path}/{key}")
    elif isinstance(node, list):
        for item in node:
            found += fonts(item, path)
    return found


@pytest.mark.parametrize(
    "path",
    [
        "/dashboards",
        "/dashboards/shape?gpu=h100&B=8&T=1024",
        "/dashboards/gpus?B=8&T=1024",
        "/dashboards/bandwidth?gpu=h100",
    ],
)
def test_no_chart_text_is_set_under_11_px_nor_shrunk_to_fit(client: TestClient, path: str) -> None:
    for figure in specs(client.get(path).text):
        assert [f for f in fonts(figure) if f[1] < draw.MIN_FONT] == []
        for trace in figure["data"]:
            if trace["type"] == "bar" and trace.get("text") is not None:
                assert trace["constraintext"] == "none"  # plotly would scale a label down to the bar


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


def test_shape_page_has_heatmap_convergence_and_scatter(client: TestClient) -> None:
    r = client.get("/dashboards/shape", params={"gpu": "h100", **SHAPE})
    assert r.status_code == 200
    kinds = [[trace["type"] for trace in f["data"]] for f in specs(r.text)]
    assert (
        kinds[0] == ["heatmap", "scatter"] and set(kinds[1]) == {"scatter"} and set(kinds[2]) == {"scatter"}
    )


def test_shape_page_marks_the_winner_in_the_heat_map(client: TestClient) -> None:
    heat = specs(client.get("/dashboards/shape", params={"gpu": "h100", **SHAPE}).text)[0]
    winner = next(t for t in heat["data"] if t.get("name") == "winner")
    assert winner["x"] == ["512"] and winner["y"] == ["split items=4 load=ldg store=stcs vec_bytes=16"]


def test_log_charts_put_each_label_at_its_line(client: TestClient) -> None:
    figures = specs(client.get("/dashboards/shape", params={"gpu": "h100", **SHAPE}).text)
    convergence, scatter = figures[1], figures[2]
    assert convergence["layout"]["yaxis"]["type"] == "log"
    for figure in (convergence, scatter):
        lines = labelled_lines(figure)
        assert len(lines) == 2  # llm.c's baseline and the device copy
        for line_y, label_y in lines:
            assert label_y == pytest.approx(line_y)
    texts = [a["text"] for a in convergence["layout"]["annotations"]]
    assert any(t.startswith("llm.c kernel1") for t in texts) and any(
        t.startswith("device copy") for t in texts
    )


def test_convergence_counts_configurations_measured_and_names_searches_shortly(client: TestClient) -> None:
    convergence = specs(client.get("/dashboards/shape", params={"gpu": "h100", **SHAPE}).text)[1]
    (trace,) = convergence["data"]
    assert trace["name"] == "seed 0" and values(trace["x"]) == [1, 2, 3, 4, 5]
    assert "measured" in convergence["layout"]["xaxis"]["title"]["text"]


def test_shape_page_links_the_winner_and_has_pickers(client: TestClient) -> None:
    text = client.get("/dashboards/shape", params={"gpu": "h100", **SHAPE}).text
    links = hrefs(text)
    assert "/best?gpu=h100&B=8&T=1024&NH=32&NH_KV=8&HD=128&dtype=bf16" in links
    assert f"/kernels/{variants.get_family('split').source_hash}" in links
    gpus = picker_options(text, "gpu")
    assert [g[0] for g in gpus] == ["h100", "h200", "l4"] and gpus[0][2]
    shapes = picker_options(text, "shape")
    assert [s[0] for s in shapes] == [str(variants.Shape(1, 1024, 32, 8, 128)), str(S1)]
    dtypes = {d[0]: d for d in picker_options(text, "dtype")}
    assert dtypes["fp32"][1] == "/dashboards/shape?gpu=h100&B=8&T=1024&NH=32&NH_KV=8&HD=128&dtype=fp32"
    assert "fp16 (not tuned)" in dtypes and dtypes["bf16"][2]


def test_shape_page_without_gpu_takes_the_only_one_that_tuned_it(client: TestClient) -> None:
    r = client.get("/dashboards/shape", params={**SHAPE, "dtype": "fp32"})
    assert r.status_code == 200 and "<h1>h100 B=8" in r.text
    several = client.get("/dashboards/shape", params=SHAPE)  # three GPUs tuned it: the reader picks
    assert several.status_code == 200 and "Pick a GPU" in several.text
    assert "/dashboards/shape?gpu=l4&B=8&T=1024&NH=32&NH_KV=8&HD=128&dtype=bf16" in hrefs(several.text)


def test_shape_page_without_gpu_on_a_one_gpu_store(tmp_path: Path) -> None:
    write_table(h100_rows(), tmp_path, "synthetic-h100")
    with make_client(tmp_path) as c:
        assert c.app.state.store.wait_ready(30)
        r = c.get("/dashboards/shape", params={"B": 1, "T": 1024})
        assert r.status_code == 200 and "<h1>h100 B=1,T=1024" in r.text
        assert c.get("/dashboards/bandwidth").status_code == 200


def test_untuned_shape_shows_what_best_serves(client: TestClient) -> None:
    r = client.get("/dashboards/shape", params={"gpu": "h100", "B": 2, "T": 3000})
    assert r.status_code == 200 and "not tuned" in r.text
    best = client.get("/best", params={"gpu": "h100", "B": 2, "T": 3000}).json()["answers"][0]
    assert best["match"] == "nearest"
    assert best["kernel"]["config_key"] in r.text
    assert f"grid {best['kernel']['grid']} x block {best['kernel']['block']}" in r.text
    links = hrefs(r.text)
    assert "/best?gpu=h100&B=2&T=3000&NH=32&NH_KV=8&HD=128&dtype=bf16" in links
    assert f"/kernels/{best['kernel']['source_hash']}" in links
    assert "/dashboards/shape?gpu=h100&B=8&T=1024&NH=32&NH_KV=8&HD=128&dtype=bf16" in links
    assert f"distance {best['distance']:.2f}" in r.text
    assert 'class="serves"' in r.text  # the nearest tuned shapes, the serving one marked
    # how that tier's answers have done, as /best says it (here no held-out answer was judged)
    quality = best["rule_quality"]
    assert "How this rule has done" in r.text and "/rule-quality?gpu=h100" in links
    if quality["median_slowdown"] is None:
        assert html.escape(quality["reason"], quote=True) in r.text
    else:
        assert f"median {quality['median_slowdown']:.3f}x" in r.text


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


def test_bandwidth_page_draws_the_peak_of_a_known_gpu(tmp_path: Path) -> None:
    rows = [{**row, "gpu_name": "NVIDIA H200"} for row in other_rows() if row["gpu"] == "h200"]
    write_table(rows, tmp_path, "synthetic-h200")
    with make_client(tmp_path) as c:
        assert c.app.state.store.wait_ready(30)
        gbps = specs(c.get("/dashboards/bandwidth").text)[0]
        assert labelled_lines(gbps) == [(4800.0, 4800.0)]
        assert "4.80 TB/s" in gbps["layout"]["annotations"][0]["text"]


def test_unknown_dashboards_are_html_404(client: TestClient) -> None:
    r = client.get("/dashboards/shape", params={"gpu": "<b>x</b>", "B": 8, "T": 1024})  # not a label
    assert r.status_code == 422 and "<b>x</b>" not in r.text and "&lt;b&gt;" in r.text
    r = client.get("/dashboards/shape", params={"gpu": "nowhere", "B": 8, "T": 1024})
    assert r.status_code == 404 and "text/html" in r.headers["content-type"]
    assert client.get("/dashboards/gpus", params={"B": 3, "T": 3}).status_code == 404


def test_plotly_js_is_served_locally(client: TestClient) -> None:
    r = client.get("/static/plotly.min.js")
    assert r.status_code == 200 and "javascript" in r.headers["content-type"] and len(r.content) > 1_000_000
    assert client.get("/", follow_redirects=False).headers["location"] == "/dashboards"


# Rows no dashboard can place must never turn into a 500 ------------------------------------


def write_unvalidated(rows: list[dict], path: Path) -> None:
    """Rows written as they are, without the trial schema's checks (a null `gpu` included)."""
    frame = pd.DataFrame(rows)
    for column in COLUMNS:
        if column not in frame:
            frame[column] = None
    frame["schema_version"] = SCHEMA_VERSION
    pq.write_table(pa.Table.from_pandas(frame[list(COLUMNS)], preserve_index=False), path)


@pytest.fixture
def bad_client(store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    good = trial("h100", S1, "bf16", "vec", VEC16, 0.01, number=9)
    bad = [{**good, "gpu": None}, {**good, "dtype": None}, {**good, "family": None}, {**good, "status": None}]
    write_unvalidated(bad, store_dir / "synthetic-bad.parquet")
    # The store drops such rows as it reads them (tests/service/api/test_bad_rows.py); let them
    # through here, so that the dashboards are seen to cope with them on their own.
    monkeypatch.setattr(results.store, "validate_table", lambda table, families=None: (table, {}))
    with make_client(store_dir) as c:
        assert c.app.state.store.wait_ready(30)
        assert c.app.state.store.state.index.frame["gpu"].isna().any()  # they did load
        yield c


@pytest.mark.parametrize(
    "path",
    [
        "/dashboards",
        "/dashboards?gpu=h100&dtype=bf16",
        "/dashboards/gpus?B=8&T=1024",
        "/dashboards/shape?gpu=h100&B=8&T=1024",
        "/dashboards/shape?B=8&T=1024&dtype=fp32",
        "/dashboards/shape?gpu=h100&B=2&T=3000",
        "/dashboards/bandwidth?gpu=h100",
    ],
)
def test_rows_without_gpu_dtype_or_family_do_not_break_the_dashboards(
    bad_client: TestClient, path: str
) -> None:
    r = bad_client.get(path)
    assert r.status_code == 200
    assert "0.0100" not in r.text  # the bad rows' 0.01 ms wins nowhere


def test_reference_line_label_uses_log10_on_a_log_axis() -> None:
    fig = go.Figure(layout={"yaxis": {"type": "log"}})
    draw.reference_line(fig, 0.67, "baseline", dash="dash", color="#000", log_y=True)
    (shape,), (label,) = fig.layout.shapes, fig.layout.annotations
    assert shape.y0 == shape.y1 == 0.67 and shape.name == label.name == "baseline"
    assert label.y == pytest.approx(math.log10(0.67)) and label.yanchor == "bottom"


def test_log_ticks_are_plain_numbers() -> None:
    ticks = draw.log_ticks([0.07, 0.66])
    assert ticks["tickvals"] == [0.1, 0.2, 0.5] and ticks["ticktext"] == ["0.1", "0.2", "0.5"]
    assert len(draw.log_ticks([0.070, 0.075])["tickvals"]) >= 1
    assert draw.log_ticks([]) == {}


def test_every_family_has_its_own_colour() -> None:
    # every op's families (names repeat across ops: one colour per name)
    assert set(draw.FAMILY_COLORS) == {name for op in variants.OPS.values() for name in op.families}
    assert len(set(draw.FAMILY_COLORS.values())) == len(draw.FAMILY_COLORS)


def test_the_shape_page_says_which_trials_its_winner_was_ranked_among(tmp_path: Path) -> None:
    rows = [
        trial("h100", S1, "bf16", "vec", VEC16, 0.10, number=0, hold_us=150.0),
        trial("h100", S1, "bf16", "vec", {**VEC16, "block": 128}, 0.05, number=1),  # unheld
    ]
    write_table(rows, tmp_path, "run")
    with make_client(tmp_path) as client:
        assert client.app.state.store.wait_ready(30)
        text = client.get("/dashboards/shape", params={"gpu": "h100", **SHAPE}).text
    assert "ranked among the 1 of these trials timed with the tuner's 150 µs hold; the other 1" in text
    assert "vec[block=256" in text.split("<b>Winner:</b>")[1][:200]
    assert "seed 0, held 150 µs (1)" in text and "searches: seed 0 (1)," in text


def test_rule_quality_note_gives_the_tiers_figures_or_why_there_are_none() -> None:
    from results.leave_one_out import TierQuality

    judged = TierQuality(0, 68, 67, 1.009, 1.054, 1.081, None)
    text = pages.rule_quality_note(judged, "h200")
    assert "answered from tier 0 (68), 67 had measured" in text
    assert "median 1.009x" in text and "p90 1.054x" in text and "worst 1.081x" in text
    assert '<a href="/rule-quality?gpu=h200">every tier</a>' in text
    none = TierQuality(2, 0, 0, None, None, None, "none of the 83 tuned (shape, dtype) of h200 <x>")
    text = pages.rule_quality_note(none, "h200")
    assert "none of the 83 tuned" in text and "&lt;x&gt;" in text and "median" not in text
    assert pages.rule_quality_note(None, "h200") == ""


def test_the_overview_lists_the_configurations_tuned_fed_apart_with_their_fed_recipes(tmp_path: Path) -> None:
    rows = [
        *h100_rows(),
        trial("h100", S1, "bf16", "vec", VEC16, 0.0431, number=20, l2="fed"),
    ]
    write_table(rows, tmp_path, "run")
    with make_client(tmp_path) as client:
        assert client.app.state.store.wait_ready(30)
        text = client.get("/dashboards").text
        fp32 = client.get("/dashboards", params={"dtype": "fp32"}).text
        fed_recipe = "/best?gpu=h100&B=8&T=1024&NH=32&NH_KV=8&HD=128&dtype=bf16&l2=fed"
        assert fed_recipe in hrefs(text)
        answer = client.get(fed_recipe).json()["answers"][0]
    winners, fed = text.split('<h2 id="fed">')
    assert "0.0431" not in winners and "0.0431" in fed and fed.count("<tr>") == 2  # head + one row
    assert (answer["l2"], answer["kernel"]["family"]) == ("fed", "vec")
    assert 'id="fed"' not in fp32  # nothing of that dtype was tuned fed
