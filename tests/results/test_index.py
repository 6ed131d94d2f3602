from __future__ import annotations

import json

import pandas as pd
from trial_rows import GATHER, NAIVE128, S1, S2, SPLIT16, VEC16, h100_rows, trial

import variants
from results.best import winners
from results.index import build_index, parse_config, shape_tuple
from results.schema import DEFAULT_HOLD_US, Status
from results.store import empty_frame


def test_candidates_are_ok_rows_fastest_first_one_per_config() -> None:
    rows = [*h100_rows(), trial("h100", S1, "bf16", "vec", VEC16, 0.12, number=9)]
    index = build_index(pd.DataFrame(rows))
    group = index.groups[("h100", (8, 1024, 32, 8, 128), "bf16")]
    assert [c.family.name for c in group.candidates] == ["split", "vec", "naive"]
    assert group.time_of(group.candidates[1].config_key) == 0.10  # the faster of the two vec trials
    assert group.baseline_ms == 0.70 and group.trials == 6


def test_unknown_families_and_bad_params_are_counted_not_served() -> None:
    rows = [
        trial("h100", S1, "bf16", "vec", VEC16, 0.1),
        {**trial("h100", S1, "bf16", "vec", VEC16, 0.01), "family": "retired", "config_key": "retired[]"},
        {
            **trial("h100", S1, "bf16", "vec", VEC16, 0.02),
            "params": json.dumps({"block": 3}),
            "config_key": "x",
        },
        {**trial("h100", S1, "bf16", "vec", VEC16, 0.03), "params": "not json", "config_key": "y"},
    ]
    index = build_index(pd.DataFrame(rows))
    group = index.groups[("h100", (8, 1024, 32, 8, 128), "bf16")]
    assert len(group.candidates) == 1 and index.unusable_rows == 3


def test_parse_config() -> None:
    family, config, params = parse_config("naive", '{"block": 128}')
    assert family.name == "naive" and config.key == "naive[block=128]" and params == {"block": 128}
    assert parse_config("naive", "[1, 2]") is None


def test_empty_store() -> None:
    index = build_index(empty_frame())
    assert index.groups == {} and index.gpus == {} and index.available_gpus() == []


def test_rows_timed_with_the_tuners_hold_rank_ahead_of_rows_timed_otherwise() -> None:
    """Held and unheld times differ by a few percent at small shapes: a configuration timed
    as the tuner times (DEFAULT_HOLD_US) ranks ahead of a faster one timed without a hold
    (null: written before the column), and one timed both ways stands by its held row."""
    held = DEFAULT_HOLD_US
    rows = [
        trial("h100", S1, "bf16", "naive", NAIVE128, 0.80, number=0, hold_us=held),
        trial("h100", S1, "bf16", "naive", NAIVE128, 0.60, number=1),  # unheld: not the baseline
        trial("h100", S1, "bf16", "split", SPLIT16, 0.09, number=2),  # null hold: read as 0
        trial("h100", S1, "bf16", "vec", VEC16, 0.10, number=3, hold_us=held),
        trial("h100", S1, "bf16", "vec", VEC16, 0.08, number=4, hold_us=0.0),
        trial("h100", S1, "bf16", "gather", GATHER, 0.07, number=5, hold_us=300.0),
    ]
    index = build_index(pd.DataFrame(rows))
    group = index.groups[("h100", (8, 1024, 32, 8, 128), "bf16")]
    assert [(c.family.name, c.time_ms) for c in group.candidates] == [
        ("vec", 0.10),
        ("naive", 0.80),
        ("gather", 0.07),
        ("split", 0.09),
    ]
    assert [c.hold_us for c in group.candidates] == [held, held, 300.0, 0.0]
    assert group.baseline_ms == 0.80  # the baseline timed alike
    best = winners(pd.DataFrame(rows))
    assert best["family"].tolist() == ["vec"] and best["speedup_vs_baseline"].tolist() == [8.0]


def test_a_group_timed_one_way_only_ranks_as_before() -> None:
    rows = [
        trial("h100", S1, "bf16", "vec", VEC16, 0.10, hold_us=0.0),
        trial("h100", S1, "bf16", "split", SPLIT16, 0.09),
    ]
    group = build_index(pd.DataFrame(rows)).groups[("h100", (8, 1024, 32, 8, 128), "bf16")]
    assert [c.family.name for c in group.candidates] == ["split", "vec"]


def test_a_configuration_timed_otherwise_than_the_groups_best_has_no_comparable_time() -> None:
    rows = [
        trial("h100", S1, "bf16", "vec", VEC16, 0.10, hold_us=DEFAULT_HOLD_US),
        trial("h100", S1, "bf16", "split", SPLIT16, 0.09),
    ]
    group = build_index(pd.DataFrame(rows)).groups[("h100", (8, 1024, 32, 8, 128), "bf16")]
    assert group.time_of(group.best.config_key) == 0.10
    assert group.time_of(group.candidates[1].config_key) is None  # leave-one-out cannot judge it


def fed_and_cold_rows() -> list[dict]:
    """S1 bf16 tuned cold (split fastest) and fed (vec fastest, split slower); S2 cold only."""
    return [
        trial("h100", S1, "bf16", "naive", NAIVE128, 0.70, number=0),
        trial("h100", S1, "bf16", "split", SPLIT16, 0.09, number=1, l2=None),  # written before: cold
        trial("h100", S1, "bf16", "vec", VEC16, 0.10, number=2, l2="cold"),
        trial("h100", S1, "bf16", "vec", VEC16, 0.05, number=3, l2="fed"),
        trial("h100", S1, "bf16", "split", SPLIT16, 0.06, number=4, l2="fed"),
        trial("h100", S1, "bf16", "naive", NAIVE128, 0.50, number=5, l2="fed"),
        trial("h100", S2, "bf16", "vec", VEC16, 0.03, number=6),
    ]


def test_each_l2_state_ranks_its_own_rows_alone() -> None:
    from results.schema import L2_FED

    index = build_index(pd.DataFrame(fed_and_cold_rows()))
    key = ("h100", (8, 1024, 32, 8, 128), "bf16")
    cold = index.groups[key]
    assert index.l2 == "cold"
    assert [(c.family.name, c.time_ms) for c in cold.candidates] == [
        ("split", 0.09),
        ("vec", 0.10),
        ("naive", 0.70),
    ]
    assert cold.baseline_ms == 0.70 and cold.trials == 3
    fed = index.in_state(L2_FED)
    assert fed.l2 == "fed" and fed is index.in_state(L2_FED)  # built once
    assert [(c.family.name, c.time_ms) for c in fed.groups[key].candidates] == [
        ("vec", 0.05),
        ("split", 0.06),
        ("naive", 0.50),
    ]
    assert fed.groups[key].baseline_ms == 0.50 and fed.groups[key].trials == 3
    s2 = ("h100", (1, 1024, 32, 8, 128), "bf16")
    assert fed.groups[s2] is index.groups[s2] and fed.groups[s2].l2 == "cold"  # never timed fed: as cold
    assert len(fed.frame) == len(index.frame)  # every row stays in the frame (exports, trials)
    assert index.in_state("cold") is index


def test_winners_and_the_baseline_are_per_l2_state() -> None:
    frame = pd.DataFrame(fed_and_cold_rows())
    cold, fed = winners(frame), winners(frame, "fed")
    assert list(cold["family"]) == ["vec", "split"] and len(fed) == 1  # S2, then S1
    assert fed.iloc[0]["family"] == "vec" and fed.iloc[0]["speedup_vs_baseline"] == 10.0


def test_a_gpu_without_fed_results_is_served_from_its_cold_ones() -> None:
    index = build_index(pd.DataFrame([*fed_and_cold_rows(), trial("h200", S1, "bf16", "vec", VEC16, 0.04)]))
    fed = index.in_state("fed")
    assert fed.groups_of("h200") == index.groups_of("h200") and fed.available_gpus() == ["h100", "h200"]
    assert [g.l2 for g in fed.groups_of("h100")] == ["cold", "fed"]  # S2, S1
    assert fed.in_state("cold") is index and index.in_state("cold") is index


def test_an_unknown_l2_state_is_a_clear_error() -> None:
    import pytest

    with pytest.raises(ValueError, match="unknown L2 state 'warm': one of cold, fed"):
        build_index(pd.DataFrame(fed_and_cold_rows())).in_state("warm")


def test_a_group_of_one_family_where_others_serve_is_partial() -> None:
    """`python -m tuner --family split` at a shape nothing else tuned: its group holds split
    alone while every family of the op serves the shape, so it is partial; a group of two
    families, the baseline's included, is not."""
    odd = variants.Shape(2, 640, 32, 8, 128)
    rows = [
        *h100_rows(),
        trial("h100", odd, "bf16", "split", SPLIT16, 0.05, number=0),
        trial("h100", odd, "bf16", "split", {**SPLIT16, "block": 256}, 0.06, number=1),
        trial("h100", S1, "fp16", "vec", VEC16, 0.10, number=0),
        trial("h100", S1, "fp16", "naive", NAIVE128, 0.70, number=1),
        # a failed trial of another family does not make the group complete
        trial("h100", odd, "bf16", "vec", VEC16, 0.0, status=Status.CRASH, number=2),
    ]
    index = build_index(pd.DataFrame(rows))
    searched = index.groups[("h100", shape_tuple(odd), "bf16")]
    assert searched.families == {"split"} and len(searched.candidates) == 2
    assert searched.partial
    assert not index.groups[("h100", shape_tuple(S1), "bf16")].partial  # naive, vec and split
    assert not index.groups[("h100", shape_tuple(S1), "fp16")].partial  # vec and naive
    assert index.groups[("h100", shape_tuple(S2), "bf16")].families == {"naive", "gather"}
    assert not index.groups[("h100", shape_tuple(S2), "bf16")].partial


def test_one_family_is_not_partial_where_no_other_family_serves() -> None:
    """repkv_forward at HD=3 in bf16: only naive serves (the others need whole words of a
    head), so a group of naive alone is a complete tuning of that shape."""
    odd_head = variants.Shape(2, 64, 32, 8, 3)
    bf16 = variants.get_dtype("bf16")
    forward = variants.get_op("repkv_forward")
    assert [n for n, f in forward.families.items() if f.valid_configs(odd_head, bf16)] == ["naive"]
    rows = [
        trial("h100", odd_head, "bf16", "naive", NAIVE128, 0.01, op="repkv_forward"),
        trial("h100", S1, "bf16", "vec", VEC16, 0.10, op="repkv_forward"),
    ]
    index = build_index(pd.DataFrame(rows), op="repkv_forward")
    alone = index.groups[("h100", shape_tuple(odd_head), "bf16")]
    assert alone.op == "repkv_forward" and alone.families == {"naive"} and not alone.partial
    assert index.groups[("h100", shape_tuple(S1), "bf16")].partial  # vec alone, where four serve
