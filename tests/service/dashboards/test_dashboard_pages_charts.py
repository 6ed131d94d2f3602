"""The dashboards' charts: colours, axes, fonts, labels, log ticks, and pages over rows lacking fields."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dashboard_page_helpers import SHAPE, labelled_lines, specs
from fastapi.testclient import TestClient
from service_client import ready_client
from trial_rows import S1, VEC16, trial

import results.store
import variants
from results.schema import COLUMNS, SCHEMA_VERSION
from service.dashboards import draw


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
    with ready_client(store_dir) as c:
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
