"""Choosing the configuration to serve for a requested shape.

A tuned (GPU, shape, dtype) answers a request exactly when shape and dtype are equal
(match "partial" where its trials are of one family while others serve the shape:
`TunedGroup.partial`).
Otherwise the tuned shapes of the same GPU are ranked by (tier, distance):

    tier 0: same dtype and same head layout (NH, NH_KV, HD)
    tier 1: same dtype, another head layout
    tier 2: another dtype

    distance = |log2(B*T / B'*T')|                 tokens: how the grid scales
             + |log2(bytes / bytes')|              bytes moved (dtype included)
             + |log2(nrep / nrep')|                replicas summed per K/V head

Within the nearest tuned shape its configurations are tried fastest first; one whose
family constraints reject the requested shape (or whose grid would exceed CUDA's limit) is
skipped, then the next tuned shape is tried. The answer carries the tuned shape it came
from and its distance.

A head layout never tuned in the requested dtype (no tier 0) is first served by the layout
rule (`results.layout_rule.serving_rank`): the configuration that ran closest to the optimum
across the nearest tuned groups, from the group that measured it best; the ranking above
follows it.

Across GPUs, `source_gpus` is the one fallback policy: a GPU is answered from its own
results; a GPU without any from the other GPUs' only where the caller asks for that.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Literal

import variants
from results import layout_rule
from results.index import Candidate, GroupKey, StoreIndex, TunedGroup, shape_tuple
from results.recipe import Recipe, build_recipe
from variants import Config, DType, Op, Shape

# What serves a shape nothing was measured near (no results at all, or none that can serve):
# a vectorized gather at block 256 with the widest word that divides a head, else `gather`.
GENERIC_BLOCK = 256
GENERIC_VEC_BYTES = (16, 8, 4)


@dataclass(frozen=True)
class Choice:
    group: TunedGroup  # the tuned shape the configuration was measured at
    candidate: Candidate
    rank: int  # 0: that shape's winner
    recipe: Recipe  # for the requested shape
    # "partial": the requested shape and dtype, but a group of one family's trials where other
    # families serve the shape (`TunedGroup.partial`); "exact" and "nearest" otherwise
    match: Literal["exact", "partial", "nearest"]
    tier: int
    distance: float


def _log2_ratio(a: int, b: int) -> float:
    return abs(math.log2(a) - math.log2(b))


def distance(shape: Shape, dtype: DType, tuned: Shape, tuned_dtype: DType) -> float:
    return (
        _log2_ratio(shape.tokens, tuned.tokens)
        + _log2_ratio(shape.bytes_moved(dtype), tuned.bytes_moved(tuned_dtype))
        + _log2_ratio(shape.nrep, tuned.nrep)
    )


def tier(shape: Shape, dtype: DType, tuned: Shape, tuned_dtype: DType) -> int:
    if dtype.name != tuned_dtype.name:
        return 2
    same_layout = shape.layout == tuned.layout
    return 0 if same_layout else 1


def rank_groups(
    groups: Iterable[TunedGroup], shape: Shape, dtype: DType
) -> list[tuple[int, float, TunedGroup]]:
    """Tuned groups in the order they are tried: exact first, then by (tier, distance)."""
    ranked = []
    for group in groups:
        exact = group.shape == shape and group.dtype.name == dtype.name
        t = tier(shape, dtype, group.shape, group.dtype)
        d = distance(shape, dtype, group.shape, group.dtype)
        order = (0 if exact else 1, t, round(d, 9), shape_tuple(group.shape), group.dtype.name)
        ranked.append((order, t, d, group))
    ranked.sort(key=lambda item: item[0])
    return [(t, d, group) for _, t, d, group in ranked]


def serving(
    groups: Iterable[TunedGroup],
    shape: Shape,
    dtype: DType,
    exclude: Collection[GroupKey] = (),
) -> Iterator[Choice]:
    """Every configuration that can serve (shape, dtype), in the order the rule tries them:
    tuned groups by rank, each group's configurations fastest first."""
    usable = [g for g in groups if g.key not in exclude]
    by_rank = rank_groups(usable, shape, dtype)
    if not any(t == 0 for t, _, _ in by_rank):  # the layout was never tuned in this dtype
        yield from _by_layout_rule(usable, shape, dtype)
    for t, d, group in by_rank:
        exact = group.shape == shape and group.dtype.name == dtype.name
        for rank, candidate in enumerate(group.candidates):
            recipe = build_recipe(candidate, shape, dtype)
            if isinstance(recipe, Recipe):
                yield Choice(
                    group=group,
                    candidate=candidate,
                    rank=rank,
                    recipe=recipe,
                    match=("partial" if group.partial else "exact") if exact else "nearest",
                    tier=t,
                    distance=d,
                )


def _by_layout_rule(groups: list[TunedGroup], shape: Shape, dtype: DType) -> Iterator[Choice]:
    yield from _scored_choices(layout_rule.serving_rank(groups, shape, dtype), shape, dtype)


def _scored_choices(ranked: Iterable[layout_rule.Scored], shape: Shape, dtype: DType) -> Iterator[Choice]:
    """The layout rule's scored configurations as answers for (shape, dtype), those that serve it."""
    for scored in ranked:
        recipe = build_recipe(scored.candidate, shape, dtype)
        if not isinstance(recipe, Recipe):
            continue
        group = scored.group
        yield Choice(
            group=group,
            candidate=scored.candidate,
            rank=group.candidates.index(scored.candidate),
            recipe=recipe,
            match="nearest",
            tier=tier(shape, dtype, group.shape, group.dtype),
            distance=distance(shape, dtype, group.shape, group.dtype),
        )


def choose(
    groups: Iterable[TunedGroup],
    shape: Shape,
    dtype: DType,
    exclude: Collection[GroupKey] = (),
) -> Choice | None:
    """The configuration to serve for (shape, dtype) from one GPU's tuned groups, or None.

    `exclude` leaves tuned groups out (the leave-one-out evaluation uses it)."""
    return next(serving(groups, shape, dtype, exclude), None)


# A head layout never tuned in the requested dtype races more configurations, of more families:
# its best one is often compiled for a layout (`tile`, `bulk`, `split` at that HD and nrep) that
# no neighbour's ranking puts first (docs/untuned.md)
UNTUNED_LAYOUT_SIZE = 8
UNTUNED_LAYOUT_FAMILY_CAP = 2


def shortlist(
    index: StoreIndex,
    gpu: str,
    shape: Shape,
    dtype: DType,
    size: int = 4,
    per_group: int = 2,
    other_gpus: bool = False,
) -> list[Choice]:
    """The few configurations worth racing on a shape nobody tuned: the served one first,
    then the best of the next nearest tuned shapes (at most `per_group` from each, each of
    another family: a group's runner-up of its winner's family would race the same kernel
    twice), distinct configurations only. An exact match is the whole list: it was measured
    there; a partial one (`TunedGroup.partial`: one family searched) leads the nearest shapes'
    picks. Where the head layout was never tuned in the dtype, UNTUNED_LAYOUT_SIZE
    configurations (at least `size`), at most UNTUNED_LAYOUT_FAMILY_CAP of each family, then
    the class rule's picks at the shape that are not among them (what the exported header
    would launch for such a layout, or near it: the race is never behind the header's rule)."""
    for label in source_gpus(index, gpu, other_gpus):
        groups = index.groups_of(label)
        cap = None
        if not layout_tuned(groups, shape, dtype):
            size, cap = max(size, UNTUNED_LAYOUT_SIZE), UNTUNED_LAYOUT_FAMILY_CAP
        found = nearest_choices(groups, shape, dtype, size, per_group, distinct_families=True, family_cap=cap)
        if cap is not None:
            keys = {c.candidate.config_key for c in found}
            classed = layout_rule.class_rank(groups, shape, dtype)[: layout_rule.CLASS_PICKS]
            found += [c for c in _scored_choices(classed, shape, dtype) if c.candidate.config_key not in keys]
        if found:
            found = [as_served_on(gpu, choice) for choice in found]
            return found[:1] if found[0].match == "exact" else found
    return []


def as_served_on(gpu: str, choice: Choice) -> Choice:
    """`choice` as an answer for `gpu`: measured at this very shape on another GPU (other_gpus)
    is no exact or partial match for `gpu`, only the nearest there is."""
    if choice.group.gpu != gpu and choice.match != "nearest":
        return replace(choice, match="nearest")
    return choice


def layout_tuned(groups: Iterable[TunedGroup], shape: Shape, dtype: DType) -> bool:
    """Whether a tuned group shares the shape's head layout and dtype (tier 0)."""
    return any(tier(shape, dtype, g.shape, g.dtype) == 0 for g in groups)


def nearest_choices(
    groups: Iterable[TunedGroup],
    shape: Shape,
    dtype: DType,
    size: int,
    per_group: int,
    exclude: Collection[GroupKey] = (),
    distinct_families: bool = False,
    family_cap: int | None = None,
) -> list[Choice]:
    """Up to `size` distinct configurations that can serve (shape, dtype), in the rule's order,
    at most `per_group` from each tuned group: the winners and runners-up of the nearest
    tuned shapes (with `distinct_families`, a group's picks are each of another family; with
    `family_cap`, at most that many of one family in all)."""
    found: list[Choice] = []
    keys: set[str] = set()
    taken: dict[GroupKey, list[str]] = {}
    per_family: dict[str, int] = {}
    for choice in serving(groups, shape, dtype, exclude):
        picked = taken.setdefault(choice.group.key, [])
        family = choice.candidate.config.family
        if choice.candidate.config_key in keys or len(picked) >= per_group:
            continue
        if distinct_families and family in picked:
            continue
        if family_cap is not None and per_family.get(family, 0) >= family_cap:
            continue
        picked.append(family)
        per_family[family] = per_family.get(family, 0) + 1
        keys.add(choice.candidate.config_key)
        found.append(choice)
        if len(found) >= size:
            break
    return found


def source_gpus(index: StoreIndex, gpu: str, other_gpus: bool = False) -> list[str]:
    """The one fallback policy across GPUs: a GPU with results is answered from its own
    results only; a GPU with none (a model nobody tuned yet) from the other GPUs', in label
    order, where the caller accepts that (`other_gpus`). The service, the Python API and the
    header export all go through here."""
    if gpu in index.by_gpu:
        return [gpu]
    return index.available_gpus() if other_gpus else []


def select(
    index: StoreIndex, gpu: str, shape: Shape, dtype: DType, other_gpus: bool = False
) -> Choice | None:
    """The configuration to serve on `gpu` for (shape, dtype): exact, else nearest, from the
    GPUs `source_gpus` names; None when none can serve. Cached per index (an index never
    changes; a reload builds a new one). `Choice.group.gpu` is the GPU that measured it."""
    key = (gpu, shape, dtype.name, other_gpus)
    if key in index.choices:
        return index.choices[key]
    found = None
    for label in source_gpus(index, gpu, other_gpus):
        found = choose(index.groups_of(label), shape, dtype)
        if found is not None:
            found = as_served_on(gpu, found)
            break
    return index.choices.put(key, found)


def generic_configs(dtype: DType, op: Op | None = None) -> list[Config]:
    """What serves a shape of `op` (default repkv_backward) where nothing tuned does, in the
    order tried. repkv_backward: `vec` at block 256, widest word first, then `gather`, which
    serves every shape. Another op: its `vec` (where it has one) at block 256 at each width,
    widest first, then its baseline (llm.c's kernel1 at block 128)."""
    op = op or variants.get_op()
    if op.name == variants.DEFAULT_OP:
        found = [
            Config.of("vec", block=GENERIC_BLOCK, vec_bytes=v, load="plain", store="plain")
            for v in GENERIC_VEC_BYTES
            if v >= dtype.itemsize
        ]
        return [*found, Config.of("gather", block=GENERIC_BLOCK, load="plain", store="plain")]
    found = [
        Config.of("vec", block=GENERIC_BLOCK, vec_bytes=v, load="plain", store="plain")
        for v in GENERIC_VEC_BYTES
        if "vec" in op.families
    ]
    return [*found, op.baseline]


def generic_config(shape: Shape, dtype: DType, op: Op | None = None) -> Config:
    """The first generic configuration of `op` that serves (shape, dtype); ValueError, with
    each one's reason, where none does (repkv_backward's `gather` serves every shape)."""
    op = op or variants.get_op()
    reasons = []
    for config in generic_configs(dtype, op):
        reason = op.family(config.family).rejection(shape, dtype, config)
        if reason is None:
            return config
        reasons.append(f"{config.key}: {reason}")
    raise ValueError(f"no kernel of {op.name} serves {shape} {dtype.name}: {'; '.join(reasons)}")
