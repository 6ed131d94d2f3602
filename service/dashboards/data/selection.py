"""The store index's side of the pages: the GPU a page shows by default, the tuned shapes for
the pickers, and what GET /best serves on a shape nobody tuned (results.selection's rule)."""

from __future__ import annotations

import pandas as pd

import variants
from results.index import StoreIndex, shape_tuple
from results.leave_one_out import rule_quality
from results.selection import rank_groups, select
from variants import DType, Shape


def default_gpu(index: StoreIndex, shape: Shape | None = None, dtype: DType | None = None) -> str | None:
    """The GPU a page shows when the request names none: the only GPU with results, else the
    only one that tuned this shape and dtype; None when the choice is the reader's."""
    gpus = index.available_gpus()
    if len(gpus) == 1:
        return gpus[0]
    if shape is not None and dtype is not None:
        tuned = [g for g in gpus if (g, shape_tuple(shape), dtype.name) in index.groups]
        if len(tuned) == 1:
            return tuned[0]
    return None


def tuned_shapes(index: StoreIndex, gpu: str | None = None) -> list[Shape]:
    """The shapes tuned (in any dtype) on one GPU, or on any, smallest first."""
    shapes = {group.shape for group in index.groups.values() if gpu is None or group.gpu == gpu}
    return sorted(shapes, key=lambda s: (s.bytes_moved(variants.get_dtype("fp32")), shape_tuple(s)))


def served_instead(index: StoreIndex, gpu: str, shape: Shape, dtype: DType) -> dict | None:
    """What GET /best would serve on `gpu` for a shape and dtype (results.selection's rule):
    the tuned shape it comes from, its distance and tier, the configuration with its launch
    geometry for the requested shape, what it measured at the tuned shape, and how answers of
    that tier have done (`rule_quality`, leave-one-out on the measuring GPU's results, as /best
    gives it). None when nothing of that GPU can serve."""
    choice = select(index, gpu, shape, dtype)
    if choice is None:
        return None
    group, candidate, recipe = choice.group, choice.candidate, choice.recipe
    return {
        "op": index.op,
        "gpu": gpu,
        "measured_gpu": group.gpu,
        "match": choice.match,
        "tuned_shape": group.shape,
        "tuned_dtype": group.dtype.name,
        "tier": choice.tier,
        "distance": float(choice.distance),
        "rank": choice.rank,
        "family": recipe.family,
        "config_key": recipe.config_key,
        "grid": recipe.grid,
        "block": recipe.block,
        "source_hash": recipe.source_hash,
        "time_ms": candidate.time_ms,
        "gbps": candidate.gbps,
        "ratio_to_copy": candidate.ratio_to_copy,
        "tuned_winner": group.best.config_key,
        "rule_quality": rule_quality(index, group.gpu).at(choice.tier),
    }


NEAREST_COLUMNS = [
    "B",
    "T",
    "NH",
    "NH_KV",
    "HD",
    "dtype",
    "tier",
    "distance",
    "config_key",
    "time_ms",
    "serves",
]


def nearest_tuned(index: StoreIndex, gpu: str, shape: Shape, dtype: DType, count: int = 5) -> pd.DataFrame:
    """The tuned shapes of `gpu` nearest to (shape, dtype) in the order the selection rule
    tries them, each with its winner; `serves` marks the one GET /best answers from."""
    served = select(index, gpu, shape, dtype)
    rows = []
    for tier, dist, group in rank_groups(index.groups_of(gpu), shape, dtype)[:count]:
        rows.append(
            {
                **group.shape.as_dict(),
                "dtype": group.dtype.name,
                "tier": tier,
                "distance": float(dist),
                "config_key": group.best.config_key,
                "time_ms": group.best.time_ms,
                "serves": served is not None and served.group.key == group.key,
            }
        )
    return pd.DataFrame(rows, columns=NEAREST_COLUMNS)
