from __future__ import annotations

import pandas as pd
import pytest
from trial_rows import GATHER, NAIVE128, S1, S2, SPLIT16, VEC16, h100_rows, other_rows, trial

import variants
from results import selection
from results.index import build_index
from results.selection import (
    choose,
    distance,
    nearest_choices,
    rank_groups,
    select,
    shortlist,
    source_gpus,
    tier,
)

BF16, FP32 = variants.get_dtype("bf16"), variants.get_dtype("fp32")


def test_distance_is_zero_for_equal_shapes_and_symmetric() -> None:
    other = variants.Shape(2, 512, 16, 4, 64)
    assert distance(S1, BF16, S1, BF16) == 0
    assert distance(S1, BF16, other, FP32) == pytest.approx(distance(other, FP32, S1, BF16))


def test_distance_counts_tokens_bytes_and_replicas() -> None:
    half = variants.Shape(4, 1024, 32, 8, 128)
    assert distance(half, BF16, S1, BF16) == pytest.approx(2.0)
    assert distance(S1, FP32, S1, BF16) == pytest.approx(1.0)  # twice the bytes
    mha = variants.Shape(8, 1024, 32, 32, 128)  # nrep 1 instead of 4; bytes 48/64 of S1
    assert distance(mha, BF16, S1, BF16) == pytest.approx(2.0 + abs(__import__("math").log2(64 / 48)))


def test_tiers() -> None:
    assert tier(S2, BF16, S1, BF16) == 0
    assert tier(variants.Shape(8, 1024, 16, 8, 128), BF16, S1, BF16) == 1
    assert tier(S1, FP32, S1, BF16) == 2


def test_rank_puts_exact_first_then_tier_then_distance() -> None:
    index = build_index(pd.DataFrame(h100_rows()))
    ranked = rank_groups(index.groups_of("h100"), S1, BF16)
    assert [(g.shape, g.dtype.name) for _, _, g in ranked] == [(S1, "bf16"), (S2, "bf16"), (S1, "fp32")]


def test_choose_excludes_groups() -> None:
    index = build_index(pd.DataFrame(h100_rows() + other_rows()))
    groups = index.groups_of("h100")
    exact = choose(groups, S1, BF16)
    assert exact.match == "exact"
    without = choose(groups, S1, BF16, exclude={exact.group.key})
    assert without.match == "nearest" and without.group.shape == S2


def test_choose_returns_none_when_nothing_serves() -> None:
    assert choose((), S1, BF16) is None


def test_a_gpu_with_results_is_answered_from_its_own_only() -> None:
    index = build_index(pd.DataFrame(h100_rows() + other_rows()))
    assert source_gpus(index, "h100") == ["h100"]
    assert source_gpus(index, "h100", other_gpus=True) == ["h100"]
    choice = select(index, "h100", S1, BF16, other_gpus=True)
    assert choice is not None and choice.group.gpu == "h100"


def test_a_gpu_without_results_falls_back_only_when_asked() -> None:
    index = build_index(pd.DataFrame(h100_rows() + other_rows()))
    assert source_gpus(index, "b200") == []
    assert select(index, "b200", S1, BF16) is None
    assert source_gpus(index, "b200", other_gpus=True) == index.available_gpus()
    choice = select(index, "b200", S1, BF16, other_gpus=True)
    assert choice is not None and choice.group.gpu == index.available_gpus()[0]
    # tuned at S1 on that GPU, which is no exact match for b200: its nearest answer
    own = select(index, choice.group.gpu, S1, BF16)
    assert own is not None and own.match == "exact" and choice.match == "nearest"
    assert choice.candidate == own.candidate and choice.tier == 0 and choice.distance == 0
    (raced,) = shortlist(index, choice.group.gpu, S1, BF16)
    borrowed = shortlist(index, "b200", S1, BF16, other_gpus=True)
    assert borrowed[0].candidate == raced.candidate and len(borrowed) > 1  # not a measured answer: raced


def test_select_caches_on_the_index_and_a_new_index_starts_empty() -> None:
    frame = pd.DataFrame(h100_rows())
    index = build_index(frame)
    first = select(index, "h100", S2, BF16)
    assert select(index, "h100", S2, BF16) is first and len(index.choices) == 1
    assert len(build_index(frame).choices) == 0


def test_shortlist_is_the_served_configuration_then_distinct_neighbours() -> None:
    index = build_index(pd.DataFrame(h100_rows()))
    odd = variants.Shape(2, 640, 32, 8, 128)  # untuned; S1 and S2 share its layout
    listed = shortlist(index, "h100", odd, BF16)
    assert listed[0].candidate.config_key == select(index, "h100", odd, BF16).candidate.config_key
    keys = [c.candidate.config_key for c in listed]
    assert len(keys) == len(set(keys)) >= 2
    assert all(sum(c.group.key == g.key for c in listed) <= 2 for g in index.groups_of("h100"))


def test_shortlist_races_a_groups_runner_up_of_another_family_not_of_its_winners() -> None:
    """A group led by two vec configurations offers the race its best vec and its best split,
    not the second vec (the warm start still takes a group's two fastest)."""
    vec8 = {**VEC16, "vec_bytes": 8}
    rows = [
        trial("h100", S1, "bf16", "vec", VEC16, 0.100, number=0),
        trial("h100", S1, "bf16", "vec", vec8, 0.101, number=1),
        trial("h100", S1, "bf16", "split", SPLIT16, 0.102, number=2),
    ]
    index = build_index(pd.DataFrame(rows))
    odd = variants.Shape(2, 640, 32, 8, 128)  # untuned, S1's layout
    listed = shortlist(index, "h100", odd, BF16)
    assert [c.candidate.config_key for c in listed] == [
        variants.Config.of("vec", **VEC16).key,
        variants.Config.of("split", **SPLIT16).key,
    ]
    groups = index.groups_of("h100")
    warm = nearest_choices(groups, odd, BF16, size=4, per_group=2)
    assert [c.candidate.config.family for c in warm] == ["vec", "vec"]


def test_shortlist_of_a_tuned_shape_is_its_winner_alone() -> None:
    index = build_index(pd.DataFrame(h100_rows()))
    (only,) = shortlist(index, "h100", S1, BF16)
    assert only.match == "exact" and only.rank == 0


ODD = variants.Shape(2, 640, 32, 8, 128)  # untuned in h100_rows: S1's layout, nearer S2


def searched_rows(*extra: dict) -> list[dict]:
    """h100_rows and ODD searched for split alone (`python -m tuner --family split`)."""
    return [
        *h100_rows(),
        trial("h100", ODD, "bf16", "split", {**SPLIT16, "block": 256}, 0.040, number=0),
        trial("h100", ODD, "bf16", "split", SPLIT16, 0.045, number=1),
        *extra,
    ]


def test_a_shape_searched_for_one_family_is_a_partial_match_of_its_best() -> None:
    index = build_index(pd.DataFrame(searched_rows()))
    served = select(index, "h100", ODD, BF16)
    assert served.match == "partial" and served.group.shape == ODD and served.rank == 0
    assert (served.tier, served.distance) == (0, 0)
    assert served.candidate.config_key == variants.Config.of("split", **{**SPLIT16, "block": 256}).key
    assert select(index, "h100", S1, BF16).match == "exact"  # naive, vec and split: as before


def test_the_shortlist_goes_on_past_a_partial_match_to_the_nearest_shapes() -> None:
    """The race weighs the searched family's best against the nearest shapes' other families."""
    index = build_index(pd.DataFrame(searched_rows()))
    listed = shortlist(index, "h100", ODD, BF16)
    assert listed[0].match == "partial" and listed[0].group.shape == ODD
    assert [c.match for c in listed[1:]] == ["nearest"] * 3
    assert [(c.group.shape, c.candidate.config.family) for c in listed[1:]] == [
        (S2, "gather"),
        (S2, "naive"),
        (S1, "split"),  # S1's winner, another split: the searched group gave its best alone
    ]
    assert listed == nearest_choices(
        index.groups_of("h100"), ODD, BF16, size=4, per_group=2, distinct_families=True
    )


def test_a_second_family_at_the_shape_makes_the_match_exact_and_the_shortlist_its_winner() -> None:
    index = build_index(pd.DataFrame(searched_rows(trial("h100", ODD, "bf16", "vec", VEC16, 0.05, number=2))))
    (only,) = shortlist(index, "h100", ODD, BF16)
    assert only.match == "exact" and only.group.shape == ODD and only.candidate.config.family == "split"
    assert select(index, "h100", ODD, BF16).match == "exact"


def test_a_layout_nobody_tuned_races_more_configurations_and_more_families() -> None:
    """Where no group shares the head layout, the shortlist grows to UNTUNED_LAYOUT_SIZE with at
    most UNTUNED_LAYOUT_FAMILY_CAP configurations of a family; a tuned layout keeps `size`."""
    rows, number = [], 0
    for shape in (S1, S2, *(variants.Shape(b, 1024, 32, 8, 128) for b in (2, 3, 4))):
        for i, block in enumerate((64, 128, 256, 512)):
            for family, params, base in (
                ("vec", VEC16, 0.10),
                ("split", SPLIT16, 0.11),
                ("gather", GATHER, 0.12),
                ("naive", NAIVE128, 0.50),
            ):
                rows.append(
                    trial(
                        "h100",
                        shape,
                        "bf16",
                        family,
                        {**params, "block": block},
                        base + i / 1000,
                        number=number,
                    )
                )
                number += 1
    index = build_index(pd.DataFrame(rows))
    other_layout = variants.Shape(2, 640, 48, 8, 128)
    listed = shortlist(index, "h100", other_layout, BF16)
    families = [c.candidate.config.family for c in listed]
    assert len(listed) == selection.UNTUNED_LAYOUT_SIZE > 4
    assert max(families.count(f) for f in set(families)) == selection.UNTUNED_LAYOUT_FAMILY_CAP
    assert len({c.candidate.config_key for c in listed}) == len(listed)
    same_layout = variants.Shape(2, 640, 32, 8, 128)
    assert len(shortlist(index, "h100", same_layout, BF16)) == 4


def test_an_untuned_layout_races_the_class_rules_picks_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """The class rule's picks at the shape (what the header's rule would launch) join the race
    of a layout nobody tuned where the nearest shapes' picks left them out."""
    from results import layout_rule

    monkeypatch.setattr(selection, "UNTUNED_LAYOUT_SIZE", 1)
    rows = [
        trial("h100", shape, "bf16", family, params, time, number=n)
        for n, (shape, family, params, time) in enumerate(
            (shape, family, params, base + i / 100)
            for i, shape in enumerate((S1, S2))
            for family, params, base in (
                ("split", SPLIT16, 0.10),
                ("vec", VEC16, 0.11),
                ("gather", GATHER, 0.12),
            )
        )
    ]
    index = build_index(pd.DataFrame(rows))
    untuned = variants.Shape(2, 640, 48, 8, 128)
    classed = layout_rule.class_rank(index.groups_of("h100"), untuned, BF16)[: layout_rule.CLASS_PICKS]
    listed = [c.candidate.config_key for c in shortlist(index, "h100", untuned, BF16, size=1)]
    assert listed[0] == select(index, "h100", untuned, BF16).candidate.config_key
    assert len(classed) == 2 and all(s.candidate.config_key in listed for s in classed)
    assert len(listed) == len(set(listed)) == 3  # split (served), then vec and gather (layout-free)
