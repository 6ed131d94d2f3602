"""GET /best refusing cleanly: 404 for what the store lacks, 422 naming the field for bad input."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from service_client import ready_client
from trial_rows import S1, VEC16, trial

import variants
from results.schema import Status
from results.store import write_table


def test_unknown_gpu_is_404_naming_the_available_ones(client: TestClient) -> None:
    r = client.get("/best", params={"B": 8, "T": 1024, "gpu": "v100"})
    assert r.status_code == 404
    assert r.json()["available"] == ["h100", "h200", "l4"] and "v100" in r.json()["detail"]


def test_empty_store_is_404_not_500(tmp_path) -> None:
    with ready_client(tmp_path / "missing") as c:
        r = c.get("/best", params={"B": 8, "T": 1024})
        assert r.status_code == 404 and "no results" in r.json()["detail"]
        assert c.get("/readyz").json()["ready"] is True


def test_store_without_correct_trials_is_404(tmp_path) -> None:
    write_table(
        [trial("h100", S1, "bf16", "vec", VEC16, 0.1, status=Status.CRASH)], tmp_path, "synthetic-failed"
    )
    with ready_client(tmp_path) as c:
        assert c.get("/best", params={"B": 8, "T": 1024, "gpu": "h100"}).status_code == 404


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"B": 0, "T": 1024}, "B"),
        ({"B": -3, "T": 1024}, "B"),
        ({"B": 2**24 + 1, "T": 1024}, "B"),
        ({"B": 10**40, "T": 1024}, "B"),
        ({"B": 1.5, "T": 1024}, "B"),
        ({"B": "eight", "T": 1024}, "B"),
        ({"B": 8}, "T"),
        ({"B": 8, "T": 1024, "NH": 30, "NH_KV": 8}, "NH_KV"),
        ({"B": 8, "T": 1024, "dtype": "int8"}, "dtype"),
        ({"B": 8, "T": 1024, "dtype": "x" * 17}, "dtype"),
        ({"B": 8, "T": 1024, "gpu": "g" * 65}, "gpu"),
        ({"B": 8, "T": 1024, "gpu": ""}, "gpu"),
    ],
)
def test_bad_input_is_422_naming_the_field(client: TestClient, params: dict, field: str) -> None:
    r = client.get("/best", params=params)
    assert r.status_code == 422, r.text
    errors = r.json()["detail"]
    assert any(e["loc"][-1] == field for e in errors)
    assert all(e["msg"] for e in errors)


def test_odd_strings_are_422_not_500(client: TestClient) -> None:
    for gpu in ["../../etc/passwd", "h100\x00", "<script>", "ß" * 10]:  # not GPU labels
        r = client.get("/best", params={"B": 8, "T": 1024, "gpu": gpu})
        assert r.status_code == 422 and "must be 1-64 lower-case letters" in r.text, (gpu, r.text)


def test_largest_shapes_are_answered_or_refused_cleanly(client: TestClient) -> None:
    top = 2**24
    r = client.get("/best", params={"B": top, "T": top, "NH": top, "NH_KV": 1, "HD": top})
    assert r.status_code == 422, r.text
    r = client.get("/best", params={"B": 5, "T": top})  # the most tokens of 32/8/128 within the limit
    assert r.status_code in (200, 404)
    for answer in r.json().get("answers", []):
        assert answer["kernel"]["grid"] <= 2**31 - 1


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"B": 2**24, "T": 2**24}, "B"),  # 2^48 tokens: dout's bytes past int64
        ({"B": 6, "T": 2**24}, "B"),  # dinp one token-batch past 256 x (2^31-1) elements
        ({"B": 1, "T": 2**24, "NH": 2**24, "NH_KV": 2**24, "HD": 2**24}, "HD"),  # no such head
    ],
)
def test_a_shape_past_the_kernels_limit_is_422_stating_it(
    client: TestClient, params: dict, field: str
) -> None:
    # before: 200 with a configuration for a dinp no kernel can index or launch
    r = client.get("/best", params={**params, "gpu": "h100"})
    assert r.status_code == 422, r.text
    (error,) = r.json()["detail"]
    assert error["loc"] == ["query", field]
    assert f"over the kernels' limit {variants.shape.MAX_ELEMENTS}" in error["msg"]


@pytest.mark.parametrize("op", ["rope_repkv_forward", "repkv_rope_backward"])
def test_an_odd_head_size_for_a_rope_op_is_422_saying_why(client: TestClient, op: str) -> None:
    # before: 404 "no tuned configuration can serve", listing every tuned shape
    r = client.get("/best", params={"B": 8, "T": 1024, "HD": 127, "op": op})
    assert r.status_code == 422, r.text
    (error,) = r.json()["detail"]
    assert error["loc"] == ["query", "HD"] and error["input"] == 127
    assert "HD=127 is odd: RoPE rotates (2i, 2i+1) pairs" in error["msg"]


def test_a_query_parameter_given_twice_is_422_naming_it(client: TestClient) -> None:
    """Not answered for the last value given (B=9 here), on every route; a dashboard says so in
    its HTML error page."""
    r = client.get("/best?B=8&T=1024&B=9")
    assert r.status_code == 422
    (problem,) = r.json()["detail"]
    assert (
        problem["loc"] == ["query", "B"] and problem["msg"] == "B is given 2 times ('8', '9'): give it once"
    )
    r = client.get("/results?gpu=h100&gpu=h200&limit=1")
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["query", "gpu"]
    page = client.get("/dashboards/shape?gpu=h100&B=8&T=1024&dtype=bf16&dtype=fp32")
    assert page.status_code == 422 and "text/html" in page.headers["content-type"]
    assert "<code>dtype</code>: dtype is given 2 times" in page.text
    assert client.get("/best?B=8&T=1024&gpu=h100").status_code == 200


def test_a_query_parameter_the_route_does_not_take_is_422_naming_it(client: TestClient) -> None:
    """Not ignored: `hd=64` (HD in the wrong case) answered for the default HD=128, on every
    route; a dashboard says so in its HTML error page."""
    r = client.get("/best", params={"B": 8, "T": 1024, "hd": 64})
    assert r.status_code == 422
    (problem,) = r.json()["detail"]
    assert problem["loc"] == ["query", "hd"] and problem["input"] == "64"
    assert problem["msg"].startswith("hd is not a parameter of /best (it takes: B, dtype, gpu, HD,")
    r = client.get("/results", params={"gpu": "h100", "limit": 1, "fmt": "csv"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["query", "fmt"]
    page = client.get("/dashboards/shape?gpu=h100&B=8&T=1024&nh=16")
    assert page.status_code == 422 and "text/html" in page.headers["content-type"]
    assert "<code>nh</code>: nh is not a parameter" in page.text
    assert client.get("/healthz?probe=1").status_code == 422
    assert client.get("/best?B=8&T=1024&NH=32&NH_KV=8&HD=128&dtype=bf16&gpu=h100&l2=cold").status_code == 200
