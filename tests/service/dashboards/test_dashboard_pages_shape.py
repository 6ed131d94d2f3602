"""The dashboards' shape page: heat map, convergence and scatter, its winner, pickers and untuned shapes."""

from __future__ import annotations

import html
from pathlib import Path

from dashboard_page_helpers import SHAPE, hrefs, picker_options, specs, values
from fastapi.testclient import TestClient
from service_client import ready_client
from trial_rows import S1, SPLIT16, VEC16, h100_rows, trial

import variants
from results.store import write_table
from service.dashboards import pages


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


def test_the_heat_maps_star_marks_the_winner_the_page_names_where_runs_disagree(tmp_path: Path) -> None:
    """An older run timed vec faster than the newest run, which timed split faster than vec:
    vec stands by its newest run, so split is the winner (/best and the summary) and the star
    sits on split's cell, though vec's cell holds the heat map's lowest time."""
    rows = [
        trial("h100", S1, "bf16", "vec", VEC16, 0.09, number=0, run_id="synthetic-old"),
        trial("h100", S1, "bf16", "vec", VEC16, 0.12, number=10, run_id="synthetic-new"),
        trial("h100", S1, "bf16", "split", SPLIT16, 0.11, number=11, run_id="synthetic-new"),
    ]
    write_table(rows, tmp_path, "runs")
    with ready_client(tmp_path) as client:
        text = client.get("/dashboards/shape", params={"gpu": "h100", **SHAPE}).text
        best = client.get("/best", params={"gpu": "h100", **SHAPE}).json()["answers"][0]
    assert best["kernel"]["family"] == "split"
    assert "<code>split[" in text.split("<b>Winner:</b>")[1][:100]
    star = next(t for t in specs(text)[0]["data"] if t.get("name") == "winner")
    assert star["x"] == ["512"] and star["y"] == ["split items=4 load=ldg store=stcs vec_bytes=16"]


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
    with ready_client(tmp_path) as c:
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


def test_the_shape_page_says_which_trials_its_winner_was_ranked_among(tmp_path: Path) -> None:
    rows = [
        trial("h100", S1, "bf16", "vec", VEC16, 0.10, number=0, hold_us=150.0),
        trial("h100", S1, "bf16", "vec", {**VEC16, "block": 128}, 0.05, number=1),  # unheld
    ]
    write_table(rows, tmp_path, "run")
    with ready_client(tmp_path) as client:
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
