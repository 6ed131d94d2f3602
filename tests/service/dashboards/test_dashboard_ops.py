"""The dashboards show one op at a time (`?op=`, default repkv_backward): an op picker on every
page, every chart and table drawn from that op's rows alone (family names repeat across ops),
an unknown op a 422 HTML page, an op without rows one line saying how to tune it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from fastapi.testclient import TestClient
from service_client import ready_client
from test_dashboard_pages import hrefs, picker_options, specs, values
from trial_rows import S1, h100_rows, other_rows, trial

import variants
from results.store import write_table
from service.dashboards import data

FORWARD = "repkv_forward"
SHAPE = {"B": 8, "T": 1024, "NH": 32, "NH_KV": 8, "HD": 128}
FORWARD_VEC = {"block": 256, "vec_bytes": 16, "load": "ldg", "store": "stcs"}
FORWARD_REPLICATE = {"block": 128, "vec_bytes": 16, "load": "plain", "store": "plain"}
# a backward vec row of the forward rows' shape, the same params and the fastest time of all,
# from its own search (seed 99): it must never show on a forward page
BACKWARD_VEC_MS = 0.0123


def forward_rows() -> list[dict]:
    return [
        trial("h100", S1, "bf16", "naive", {"block": 128}, 0.30, op=FORWARD, number=0),
        trial("h100", S1, "bf16", "vec", FORWARD_VEC, 0.07, op=FORWARD, number=1),
        trial("h100", S1, "bf16", "replicate", FORWARD_REPLICATE, 0.09, op=FORWARD, number=2),
        trial("h200", S1, "bf16", "replicate", FORWARD_REPLICATE, 0.08, op=FORWARD, number=0),
    ]


def backward_vec_row() -> dict:
    return trial("h100", S1, "bf16", "vec", FORWARD_VEC, BACKWARD_VEC_MS, number=9, seed=99)


@pytest.fixture(scope="module")
def ops_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    directory = tmp_path_factory.mktemp("ops") / "results"
    write_table([*h100_rows(), backward_vec_row()], directory, "synthetic-backward")
    write_table(other_rows(), directory, "synthetic-others")
    write_table(forward_rows(), directory, "synthetic-forward")
    with ready_client(directory) as client:
        yield client


SHAPE_QUERY = "B=8&T=1024&NH=32&NH_KV=8&HD=128&dtype=bf16"
PAGES = {
    "overview": "/dashboards",
    "shape": f"/dashboards/shape?gpu=h100&{SHAPE_QUERY}",
    "gpus": f"/dashboards/gpus?{SHAPE_QUERY}",
    "bandwidth": "/dashboards/bandwidth?gpu=h100",
}


def with_op(path: str, op: str) -> str:
    return f"{path}{'&' if '?' in path else '?'}op={op}"


def numbers(html: str) -> set[float]:
    """Every number the page's figures carry."""
    found: set[float] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if "bdata" in node:
                found.update(float(v) for v in values(node) if v == v)
            else:
                for value in node.values():
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
        elif isinstance(node, int | float) and not isinstance(node, bool):
            found.add(float(node))

    for spec in specs(html):
        walk(spec["data"])
    return found


@pytest.mark.parametrize("name", list(PAGES))
def test_every_page_has_an_op_picker_listing_every_op(ops_client: TestClient, name: str) -> None:
    for op in (variants.DEFAULT_OP, FORWARD):
        r = ops_client.get(with_op(PAGES[name], op))
        assert r.status_code == 200, r.text
        options = picker_options(r.text, "op")
        assert [text.split()[0] for text, _, _ in options] == list(variants.OPS)
        assert [text for text, _, selected in options if selected] == [op]
        for text, url, _ in options:
            named = text.split()[0]
            # each option loads this page for its op (the default op's without op=)
            assert url.split("?")[0] == PAGES[name].split("?")[0]
            assert (f"op={named}" in url) == (named != variants.DEFAULT_OP), url
            assert text.endswith("(no results)") == (named not in (variants.DEFAULT_OP, FORWARD))
            assert ops_client.get(url).status_code == 200, url


@pytest.mark.parametrize("name", list(PAGES))
def test_the_default_op_is_the_page_of_before(ops_client: TestClient, name: str) -> None:
    plain = ops_client.get(PAGES[name]).text
    assert plain == ops_client.get(with_op(PAGES[name], variants.DEFAULT_OP)).text
    assert "replicate" not in plain  # a forward family
    assert not [h for h in hrefs(plain) if "op=" in h]  # the links of the default op name none


@pytest.mark.parametrize("name", list(PAGES))
def test_a_forward_page_shows_forward_rows_only(ops_client: TestClient, name: str) -> None:
    r = ops_client.get(with_op(PAGES[name], FORWARD))
    assert r.status_code == 200, r.text
    assert f"({FORWARD})</h1>" in r.text
    # the backward vec row: neither its time nor its search, anywhere on the page
    assert BACKWARD_VEC_MS not in numbers(r.text)
    assert "seed 99" not in r.text and str(BACKWARD_VEC_MS) not in r.text
    backward_vec = variants.get_op().family("vec").source_hash
    assert f"/kernels/{backward_vec}" not in r.text
    for href in hrefs(r.text):
        if href.startswith(("/dashboards", "/best", "/rule-quality")):
            assert f"op={FORWARD}" in href, href


def test_the_forward_overview_ranks_the_forward_rows(ops_client: TestClient) -> None:
    text = ops_client.get(f"/dashboards?op={FORWARD}").text
    winners = re.findall(r"<td><code>([^<]*)</code>", text)
    assert [key.split("[")[0] for key in winners] == ["vec", "replicate"]  # h100, h200
    forward_vec = variants.get_op(FORWARD).family("vec").source_hash
    assert f"/kernels/{forward_vec}" in text
    _, _, families = specs(text)
    # the families chart: the forward op's families, in its registry's order
    assert [list(trace["x"]) for trace in families["data"]] == [["naive", "vec", "replicate"]]
    # the recipe links answer, from the forward op's rows
    recipe = next(h for h in hrefs(text) if h.startswith("/best") and "gpu=h100" in h)
    body = ops_client.get(recipe).json()
    assert body["op"] == FORWARD and body["answers"][0]["kernel"]["family"] == "vec"
    assert body["answers"][0]["measured"]["time_ms"] == pytest.approx(0.07)


def test_the_forward_shape_page_has_the_forward_trials(ops_client: TestClient) -> None:
    text = ops_client.get(with_op(PAGES["shape"], FORWARD)).text
    assert "<p>3 trials, 3 correct;" in text
    heat, _, scatter = specs(text)
    assert sorted(heat["data"][0]["y"]) == sorted(
        ["naive", "replicate load=plain store=plain vec_bytes=16", "vec load=ldg store=stcs vec_bytes=16"]
    )
    times = sorted(t for trace in scatter["data"] for t in values(trace.get("y", [])) if t == t)
    assert times == pytest.approx([0.07, 0.09, 0.30])
    # and the backward page still sees its own vec row
    assert "seed 99" in ops_client.get(PAGES["shape"]).text


def test_a_page_the_forward_op_has_no_gpu_for_lists_its_gpus(ops_client: TestClient) -> None:
    r = ops_client.get(f"/dashboards/bandwidth?gpu=l4&op={FORWARD}")
    assert r.status_code == 404
    assert {h for h in hrefs(r.text) if "gpu=" in h} == {
        f"/dashboards/bandwidth?gpu=h100&op={FORWARD}",
        f"/dashboards/bandwidth?gpu=h200&op={FORWARD}",
    }


@pytest.mark.parametrize("name", list(PAGES))
def test_an_unknown_op_is_a_422_html_page(ops_client: TestClient, name: str) -> None:
    r = ops_client.get(with_op(PAGES[name], "rope"))
    assert r.status_code == 422
    assert r.headers["content-type"].startswith("text/html")
    assert "<title>Invalid request" in r.text and "<code>op</code>" in r.text
    assert all(op in r.text for op in variants.OPS)


@pytest.mark.parametrize("name", list(PAGES))
def test_an_op_without_rows_says_how_to_tune_it(ops_client: TestClient, name: str) -> None:
    op = "rope_repkv_forward"
    r = ops_client.get(with_op(PAGES[name], op))
    assert r.status_code == 200, r.text
    (line,) = re.findall(r'<p class="untuned">(.*?)</p>', r.text)
    assert f"<code>python -m tuner --op {op}</code>" in line
    assert specs(r.text) == [] and "<table" not in r.text
    assert [text for text, _, selected in picker_options(r.text, "op") if selected] == [f"{op} (no results)"]


def test_an_empty_store_says_no_results_for_the_default_op(tmp_path: Path) -> None:
    """Not three empty charts: the line that says how to tune, on every page and op."""
    with ready_client(tmp_path / "empty") as client:
        for name, path in PAGES.items():
            for op in (variants.DEFAULT_OP, FORWARD):
                r = client.get(with_op(path, op))
                assert r.status_code == 200, (name, op)
                assert f"python -m tuner --op {op}" in r.text and specs(r.text) == [], (name, op)
                assert 'class="unread"' not in r.text


def test_a_store_of_unreadable_files_says_so(tmp_path: Path) -> None:
    (tmp_path / "h100").mkdir(parents=True)
    (tmp_path / "h100" / "corrupt.parquet").write_bytes(b"PAR1 not a parquet file")
    with ready_client(tmp_path) as client:
        r = client.get("/dashboards")
        assert r.status_code == 200 and specs(r.text) == []
        (line,) = re.findall(r'<p class="unread">(.*?)</p>', r.text)
        assert line.startswith("1 results file or directory could not be read: see ") and '"/readyz"' in line


def test_the_data_functions_take_one_op() -> None:
    frame = pd.DataFrame([*h100_rows(), backward_vec_row(), *other_rows(), *forward_rows()])
    forward = data.overview(frame, op=FORWARD)
    assert set(forward["op"]) == {FORWARD} and len(forward) == 2
    assert (
        forward.set_index("gpu").loc["h100", "source_hash"]
        == variants.get_op(FORWARD).family("vec").source_hash
    )
    backward = data.overview(frame)  # the default op's
    assert set(backward["op"]) == {variants.DEFAULT_OP} and set(backward["gpu"]) == {"h100", "h200", "l4"}
    assert BACKWARD_VEC_MS in set(backward["time_ms"])
    # every op's at once: each (GPU, shape, dtype) once per op
    assert len(data.overview(frame, op=None)) == len(forward) + len(backward)
    assert set(data.family_vs_best(frame, op=FORWARD)["family"]) == {"naive", "vec", "replicate"}
    assert len(data.shape_trials(frame, "h100", S1, "bf16", FORWARD)) == 3
    assert set(data.family_best(frame, S1, "bf16", FORWARD)["family"]) == {"naive", "vec", "replicate"}
    assert data.gpu_comparison(frame, S1, "bf16", FORWARD)["gpu"].tolist() == ["h100", "h200"]
    assert data.gpu_comparison(frame.iloc[::-1], S1, "bf16", FORWARD)["gpu_order"].tolist() == [0, 1]
    assert data.bandwidth(frame, "h100", FORWARD)["time_ms"].tolist() == pytest.approx([0.07])
    # a GPU keeps its colour from op to op: its place among every op's GPUs
    only_forward_l4 = pd.concat([frame, pd.DataFrame([{**forward_rows()[-1], "gpu": "a100"}])])
    assert data.overview(only_forward_l4)["gpu_order"].tolist()[0] == 1  # h100, after a100
    assert set(data.overview(only_forward_l4, op=FORWARD)["gpu_order"]) == {0, 1, 2}
    # bytes moved are the op's: the fused RoPE ops read freqs_cis too
    rope = {**frame.iloc[0].to_dict(), "op": "repkv_rope_backward"}
    dtype = variants.get_dtype("bf16")
    assert data.rows.bytes_moved(rope) == S1.bytes_moved(dtype) + S1.T * S1.HD * dtype.itemsize
    assert data.moved_bytes_text() == "every dout read once, every dinp written once"
