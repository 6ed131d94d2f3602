"""Leave-one-out figures in GET /best's nearest answers and in GET /rule-quality, over a
store whose figures are worked out by hand (trial_rows.rule_quality_rows)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from service_client import ready_client
from trial_rows import SPLIT16, VEC16, rule_quality_rows, trial

import variants
from results.store import write_table


@pytest.fixture(scope="module")
def rule_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    directory = tmp_path_factory.mktemp("rule-quality") / "results"
    write_table(rule_quality_rows(), directory, "synthetic-rule-quality")
    with ready_client(directory) as c:
        yield c


def the_answer(client: TestClient, **params: object) -> dict:
    response = client.get("/best", params=params)
    assert response.status_code == 200, response.text
    answers = response.json()["answers"]
    assert len(answers) == 1
    return answers[0]


def test_a_nearest_answer_carries_its_tiers_figures(rule_client: TestClient) -> None:
    body = the_answer(rule_client, B=16, T=1024, gpu="g")
    assert body["match"] == "nearest" and body["tier"] == 0 and body["tuned_shape"]["B"] == 8
    quality = body["rule_quality"]
    assert {k: quality[k] for k in ("tier", "held_out", "judged", "not_judged", "reason")} == {
        "tier": 0,
        "held_out": 3,
        "judged": 3,
        "not_judged": 0,
        "reason": None,
    }
    assert quality["median_slowdown"] == pytest.approx(1.2)
    assert quality["p90_slowdown"] == pytest.approx(1.24)
    assert quality["worst_slowdown"] == pytest.approx(1.25)


def test_each_tier_answers_with_its_own_figures(rule_client: TestClient) -> None:
    other_layout = the_answer(rule_client, B=8, T=1024, HD=96, gpu="g")
    assert other_layout["tier"] == 1
    quality = other_layout["rule_quality"]
    assert (quality["tier"], quality["held_out"], quality["judged"], quality["not_judged"]) == (1, 1, 0, 1)
    assert quality["median_slowdown"] is None and quality["p90_slowdown"] is None
    assert "never measured" in quality["reason"]
    other_dtype = the_answer(rule_client, B=8, T=1024, dtype="fp16", gpu="g")
    assert other_dtype["tier"] == 2 and other_dtype["rule_quality"]["tier"] == 2
    assert other_dtype["rule_quality"]["worst_slowdown"] == pytest.approx(8.0 / 6.0)


def test_an_exact_answer_carries_none(rule_client: TestClient) -> None:
    body = the_answer(rule_client, B=8, T=1024, gpu="g")
    assert body["match"] == "exact" and body["tier"] == 0
    assert body["rule_quality"] is None


def test_one_tuned_shape_says_there_is_not_enough_data(rule_client: TestClient) -> None:
    quality = the_answer(rule_client, B=16, T=1024, gpu="solo")["rule_quality"]
    assert (quality["held_out"], quality["judged"]) == (0, 0)
    assert quality["median_slowdown"] is None and quality["worst_slowdown"] is None
    assert quality["reason"] == "solo has one tuned (shape, dtype): left out, nothing remains to answer it"


def test_every_gpus_answer_carries_that_gpus_figures(rule_client: TestClient) -> None:
    answers = rule_client.get("/best", params={"B": 16, "T": 1024}).json()["answers"]
    figures = {a["gpu"]: a["rule_quality"]["judged"] for a in answers}
    assert figures == {"g": 3, "solo": 0}
    # another GPU's results: the figures are those of the GPU that measured the answer
    borrowed = the_answer(rule_client, B=16, T=1024, gpu="h999", other_gpus=True)
    assert borrowed["measured_gpu"] == "g" and borrowed["rule_quality"]["judged"] == 3


def test_rule_quality_route_lists_every_tier_per_gpu(rule_client: TestClient) -> None:
    body = rule_client.get("/rule-quality").json()
    assert [g["gpu"] for g in body] == ["g", "solo"]
    g = body[0]
    assert (g["tuned"], g["unanswered"]) == (5, 0)
    assert [t["tier"] for t in g["tiers"]] == [0, 1, 2]
    assert [t["judged"] for t in g["tiers"]] == [3, 0, 1]
    assert g["tiers"][0]["median_slowdown"] == pytest.approx(1.2)
    only = rule_client.get("/rule-quality", params={"gpu": "solo"}).json()
    assert len(only) == 1 and only[0]["unanswered"] == 1
    missing = rule_client.get("/rule-quality", params={"gpu": "nope"})
    assert missing.status_code == 404 and missing.json()["available"] == ["g", "solo"]


def test_the_figures_are_computed_as_the_store_loads(rule_client: TestClient) -> None:
    index = rule_client.app.state.store.state.index
    assert set(index.rule_quality) == {"g", "solo"}


def test_openapi_documents_rule_quality(rule_client: TestClient) -> None:
    spec = rule_client.get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    field = schemas["BestAnswer"]["properties"]["rule_quality"]
    assert {"$ref": "#/components/schemas/TierQualityModel"} in field["anyOf"]
    assert "leave-one-out" in field["description"]
    assert "tier" in schemas["BestAnswer"]["required"]
    assert set(schemas["TierQualityModel"]["required"]) >= {"held_out", "judged", "median_slowdown", "reason"}
    assert "/rule-quality" in spec["paths"]


def test_rule_quality_with_l2_fed_is_the_figures_best_serves_with_l2_fed(tmp_path: Path) -> None:
    """B=2 tuned fed too, where vec wins: fed, B=1 and B=8 are served vec from B=2, their own
    best (1.0x), so the fed figures differ from the cold ones that /rule-quality gave alone."""
    b2 = variants.Shape(2, 1024, 32, 8, 128)
    fed = [
        trial("g", b2, "bf16", "vec", VEC16, 1.5, number=20, l2="fed"),
        trial("g", b2, "bf16", "split", SPLIT16, 2.0, number=21, l2="fed"),
    ]
    write_table([*rule_quality_rows(), *fed], tmp_path, "synthetic-rule-quality-fed")
    with ready_client(tmp_path) as client:
        served = the_answer(client, B=16, T=1024, gpu="g", l2="fed")["rule_quality"]
        cold = the_answer(client, B=16, T=1024, gpu="g")["rule_quality"]
        (listed,) = client.get("/rule-quality", params={"gpu": "g", "l2": "fed"}).json()
        (listed_cold,) = client.get("/rule-quality", params={"gpu": "g"}).json()
        bad = client.get("/rule-quality", params={"l2": "hot"})
    assert served != cold and served["tier"] == 0
    assert next(t for t in listed["tiers"] if t["tier"] == 0) == served
    assert next(t for t in listed_cold["tiers"] if t["tier"] == 0) == cold
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["query", "l2"]
