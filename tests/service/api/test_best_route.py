from __future__ import annotations

import pytest
from conftest import S1, S2, SPLIT16, VEC16, make_client, trial
from fastapi.testclient import TestClient

import variants
from results.best import winners
from results.schema import Status
from results.store import load_results, write_table


def the_answer(response) -> dict:
    """The one answer of a GET /best that named its gpu."""
    assert response.status_code == 200, response.text
    answers = response.json()["answers"]
    assert len(answers) == 1
    return answers[0]


def test_exact_match_serves_the_winner_with_its_launch_recipe(client: TestClient) -> None:
    r = client.get("/best", params={"B": 8, "T": 1024, "gpu": "h100"})
    assert r.status_code == 200, r.text
    body = the_answer(r)
    assert body["match"] == "exact" and body["distance"] == 0 and body["rank"] == 0
    kernel = body["kernel"]
    split = variants.get_family("split")
    config = variants.Config.of("split", block=512, vec_bytes=16, items=4, load="ldg", store="stcs")
    bf16 = variants.get_dtype("bf16")
    assert kernel["family"] == "split"
    assert kernel["name_expression"] == split.name_expression(S1, bf16, config)
    launch = split.geometry(S1, bf16, config, 132)
    assert (kernel["grid"], kernel["block"]) == (launch.grid, launch.block)
    assert kernel["compile_options"] == list(split.compile_options)
    assert kernel["kernel_arguments"] == variants.KERNEL_ARGUMENTS
    assert kernel["source_url"] == f"/kernels/{split.source_hash}"
    assert kernel["source"] is None
    measured = body["measured"]
    assert measured["time_ms"] == pytest.approx(0.09)
    assert measured["baseline_ms"] == pytest.approx(0.70)
    assert measured["speedup_vs_baseline"] == pytest.approx(0.70 / 0.09)
    assert measured["gpu_name"] == "SYNTHETIC H100" and measured["source_current"] is True
    assert measured["measured_at"].startswith("2025-01-01")


def test_exact_answer_agrees_with_results_best_winners(client: TestClient, store_dir) -> None:
    frame, _ = load_results(store_dir)
    best = winners(frame)
    row = best[(best["gpu"] == "h100") & (best["T"] == 1024) & (best["B"] == 1) & (best["dtype"] == "bf16")]
    body = the_answer(client.get("/best", params={"B": 1, "T": 1024, "gpu": "h100"}))
    assert body["kernel"]["config_key"] == row["config_key"].item()
    assert body["measured"]["speedup_vs_baseline"] == pytest.approx(row["speedup_vs_baseline"].item())


def test_failed_trials_are_never_served(client: TestClient) -> None:
    # a wrong_result row at 0.001 ms and a crash row exist for S1; neither may win
    body = the_answer(client.get("/best", params={"B": 8, "T": 1024, "gpu": "h100"}))
    assert body["kernel"]["family"] == "split"


def test_nearest_names_the_tuned_shape_and_distance(client: TestClient) -> None:
    body = the_answer(client.get("/best", params={"B": 4, "T": 1024, "gpu": "h100"}))
    assert body["match"] == "nearest"
    assert body["tuned_shape"] == S1.as_dict() and body["tuned_dtype"] == "bf16"
    assert body["distance"] == pytest.approx(2.0)  # tokens and bytes both half of S1's
    assert body["shape"] == variants.Shape(4, 1024, 32, 8, 128).as_dict()
    split = variants.get_family("split")
    config = variants.Config.of("split", block=512, vec_bytes=16, items=4, load="ldg", store="stcs")
    launch = split.geometry(variants.Shape(4, 1024, 32, 8, 128), variants.get_dtype("bf16"), config, 132)
    assert body["kernel"]["grid"] == launch.grid  # geometry of the requested shape, not the tuned one


def test_same_dtype_is_preferred_over_a_closer_other_dtype(client: TestClient) -> None:
    body = the_answer(client.get("/best", params={"B": 8, "T": 1024, "gpu": "h100", "dtype": "fp32"}))
    assert body["match"] == "exact" and body["kernel"]["family"] == "vec"
    body = the_answer(client.get("/best", params={"B": 8, "T": 1024, "gpu": "h100", "dtype": "fp16"}))
    assert body["match"] == "nearest" and body["tuned_dtype"] == "bf16"


def test_a_rejected_configuration_is_skipped_for_the_next_best(client: TestClient) -> None:
    # HD=100, a layout nobody tuned, is not a multiple of 8 bf16 lanes: split and vec (16-byte)
    # reject it; of the rest, the layout rule serves gather (S2's best, never measured at S1)
    # over naive (7x S1's best and 4x S2's)
    body = the_answer(client.get("/best", params={"B": 8, "T": 1024, "HD": 100, "gpu": "h100"}))
    assert body["match"] == "nearest" and body["tuned_shape"] == S2.as_dict()
    assert body["kernel"]["family"] == "gather" and body["rank"] == 0


def test_falls_back_to_the_next_shape_when_every_configuration_rejects(client: TestClient) -> None:
    body = the_answer(client.get("/best", params={"B": 8, "T": 1024, "HD": 100, "gpu": "l4"}))
    assert body["tuned_shape"] == S2.as_dict() and body["kernel"]["family"] == "gather"


def test_served_configurations_always_accept_the_requested_shape(client: TestClient) -> None:
    for b, t, nh, nh_kv, hd, dtype in [
        (3, 77, 12, 4, 100, "fp16"),
        (1, 1, 1, 1, 1, "fp32"),
        (2, 5000, 64, 64, 24, "bf16"),
        (16, 4096, 48, 6, 80, "bf16"),
    ]:
        r = client.get("/best", params={"B": b, "T": t, "NH": nh, "NH_KV": nh_kv, "HD": hd, "dtype": dtype})
        assert r.status_code == 200, r.text
        shape, dt = variants.Shape(b, t, nh, nh_kv, hd), variants.get_dtype(dtype)
        for answer in r.json()["answers"]:
            kernel = answer["kernel"]
            config = variants.Config(kernel["family"], tuple(sorted(kernel["params"].items())))
            assert variants.get_family(kernel["family"]).rejection(shape, dt, config) is None


def test_without_gpu_answers_every_gpu(client: TestClient) -> None:
    body = client.get("/best", params={"B": 8, "T": 1024}).json()
    assert [a["gpu"] for a in body["answers"]] == ["h100", "h200", "l4"]
    assert body["answers"][1]["kernel"]["family"] == "vec"


def test_with_or_without_gpu_the_response_has_one_shape(client: TestClient) -> None:
    every = client.get("/best", params={"B": 4, "T": 1024, "dtype": "bf16"}).json()
    one = client.get("/best", params={"B": 4, "T": 1024, "dtype": "bf16", "gpu": "h200"}).json()
    for body in (every, one):
        assert set(body) == {"op", "shape", "dtype", "answers"} and body["op"] == "repkv_backward"
        assert body["shape"] == {"B": 4, "T": 1024, "NH": 32, "NH_KV": 8, "HD": 128}
        assert body["dtype"] == "bf16"
    assert len(one["answers"]) == 1 and one["answers"][0] == every["answers"][1]
    assert one["answers"][0]["gpu"] == "h200"


def test_an_old_source_is_served_but_named(client: TestClient) -> None:
    body = the_answer(client.get("/best", params={"B": 8, "T": 1024, "gpu": "h200"}))
    assert body["measured"]["source_hash"] == "0123456789abcdef"
    assert body["measured"]["source_current"] is False
    assert body["kernel"]["source_hash"] == variants.get_family("vec").source_hash


def test_include_source_embeds_the_kernel_source(client: TestClient) -> None:
    body = the_answer(client.get("/best", params={"B": 8, "T": 1024, "gpu": "h100", "include_source": True}))
    assert body["kernel"]["source"] == variants.get_family("split").source


def test_unknown_gpu_is_404_naming_the_available_ones(client: TestClient) -> None:
    r = client.get("/best", params={"B": 8, "T": 1024, "gpu": "v100"})
    assert r.status_code == 404
    assert r.json()["available"] == ["h100", "h200", "l4"] and "v100" in r.json()["detail"]


def test_empty_store_is_404_not_500(tmp_path) -> None:
    with make_client(tmp_path / "missing") as c:
        assert c.app.state.store.wait_ready(30)
        r = c.get("/best", params={"B": 8, "T": 1024})
        assert r.status_code == 404 and "no results" in r.json()["detail"]
        assert c.get("/readyz").json()["ready"] is True


def test_store_without_correct_trials_is_404(tmp_path) -> None:
    write_table(
        [trial("h100", S1, "bf16", "vec", VEC16, 0.1, status=Status.CRASH)], tmp_path, "synthetic-failed"
    )
    with make_client(tmp_path) as c:
        assert c.app.state.store.wait_ready(30)
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
        ({"B": 1, "T": 2**24, "NH": 2**24, "NH_KV": 2**24, "HD": 2**24}, "B"),
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


def test_gpu_and_dtype_are_read_in_any_case(client: TestClient) -> None:
    # before: gpu=H100 was 404 and dtype=BF16 422
    lower = the_answer(client.get("/best", params={"B": 8, "T": 1024, "gpu": "h100", "dtype": "bf16"}))
    upper = the_answer(client.get("/best", params={"B": 8, "T": 1024, "gpu": "H100", "dtype": "BF16"}))
    assert upper == lower and upper["gpu"] == "h100" and upper["dtype"] == "bf16"


def test_other_gpus_answers_a_gpu_without_results_and_names_the_measuring_one(client: TestClient) -> None:
    body = the_answer(client.get("/best", params={"B": 8, "T": 1024, "gpu": "v100", "other_gpus": True}))
    assert body["gpu"] == "v100" and body["measured_gpu"] == "h100"
    own = the_answer(client.get("/best", params={"B": 8, "T": 1024, "gpu": "h200", "other_gpus": True}))
    assert own["measured_gpu"] == "h200"


def test_a_hopper_only_kernel_says_so_and_the_peak_and_empty_launch_are_given(tmp_path) -> None:
    bulk = {"block": 128, "groups": 2, "stages": 3, "blocks_per_sm": 0, "l2": "none"}
    rows = [
        trial("h200", S1, "bf16", "vec", VEC16, 0.10, number=0),
        trial(
            "h200", S1, "bf16", "bulk", bulk, 0.09, number=1, gpu_name="NVIDIA H200", empty_launch_ms=0.003
        ),
    ]
    write_table(rows, tmp_path, "run")
    with make_client(tmp_path) as client:
        assert client.app.state.store.wait_ready(30)
        body = the_answer(client.get("/best", params={"B": 8, "T": 1024, "gpu": "h200"}))
    assert body["kernel"]["family"] == "bulk"
    assert body["kernel"]["min_compute_capability"] == 90
    measured = body["measured"]
    assert measured["frac_peak"] == pytest.approx(measured["gbps"] / 4800.0)
    assert measured["empty_launch_ms"] == pytest.approx(0.003)
    assert measured["ratio_to_empty_launch"] == pytest.approx(0.09 / 0.003)
    assert variants.get_family("vec").min_compute_capability == 0


def test_the_answer_says_how_its_copy_was_timed(tmp_path) -> None:
    rows = [
        trial("h200", S1, "bf16", "vec", VEC16, 0.10, number=0, copy_method="fastest"),
        trial("h200", S2, "bf16", "vec", VEC16, 0.10, number=1),  # timed before: memcpy alone
    ]
    write_table(rows, tmp_path, "run")
    with make_client(tmp_path) as client:
        assert client.app.state.store.wait_ready(30)
        fastest = the_answer(client.get("/best", params={"B": S1.B, "T": S1.T, "gpu": "h200"}))
        before = the_answer(client.get("/best", params=S2.as_dict() | {"gpu": "h200"}))
    assert fastest["measured"]["copy_method"] == "fastest"
    assert before["measured"]["copy_method"] is None


def test_a_group_timed_with_the_hold_is_served_from_those_rows_and_says_so(tmp_path) -> None:
    rows = [
        trial("h200", S1, "bf16", "vec", VEC16, 0.10, number=0, hold_us=150.0),
        trial("h200", S1, "bf16", "split", SPLIT16, 0.08, number=1),  # older, unheld: ranked after
    ]
    write_table(rows, tmp_path, "run")
    with make_client(tmp_path) as client:
        assert client.app.state.store.wait_ready(30)
        body = the_answer(client.get("/best", params={"B": 8, "T": 1024, "gpu": "h200"}))
    assert body["kernel"]["family"] == "vec" and body["measured"]["hold_us"] == 150.0


def test_l2_fed_serves_the_configurations_tuned_fed_and_each_answer_says_its_state(tmp_path) -> None:
    rows = [
        trial("h200", S1, "bf16", "split", SPLIT16, 0.08, number=0, hold_us=150.0),
        trial("h200", S1, "bf16", "vec", VEC16, 0.10, number=1, hold_us=150.0),
        trial("h200", S1, "bf16", "vec", VEC16, 0.05, number=2, hold_us=150.0, l2="fed"),
        trial("h200", S1, "bf16", "split", SPLIT16, 0.06, number=3, hold_us=150.0, l2="fed"),
        trial("h100", S1, "bf16", "split", SPLIT16, 0.09, number=4),  # cold only
    ]
    write_table(rows, tmp_path, "run")
    shape = {"B": S1.B, "T": S1.T}
    with make_client(tmp_path) as client:
        assert client.app.state.store.wait_ready(30)
        cold = the_answer(client.get("/best", params=shape | {"gpu": "h200"}))
        fed = the_answer(client.get("/best", params=shape | {"gpu": "h200", "l2": "fed"}))
        borrowed = the_answer(client.get("/best", params=shape | {"gpu": "h100", "l2": "fed"}))
        every = client.get("/best", params=shape | {"l2": "fed"}).json()["answers"]
        bad = client.get("/best", params=shape | {"l2": "warm"})
    assert (cold["kernel"]["family"], cold["l2"], cold["measured"]["time_ms"]) == ("split", "cold", 0.08)
    assert (fed["kernel"]["family"], fed["l2"], fed["measured"]["time_ms"]) == ("vec", "fed", 0.05)
    assert (borrowed["kernel"]["family"], borrowed["l2"]) == ("split", "cold")  # h100 has no fed rows
    assert [(a["gpu"], a["l2"]) for a in every] == [("h100", "cold"), ("h200", "fed")]
    assert bad.status_code == 422 and "l2" in bad.text
