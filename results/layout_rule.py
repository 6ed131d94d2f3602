"""The rule for a head layout nobody tuned: which configuration to serve, learned from the store.

A head layout (NH, NH_KV, HD) that no tuned shape of the GPU shares in the requested dtype
has no group of its own to be served from, and the single nearest tuned shape is a poor
guide (one shape's winner can run 1.3-4.8x behind at another layout; docs/untuned.md). The
rule instead asks how each configuration fared across the store's nearest tuned groups:

    neighbours  the NEIGHBOURS tuned groups of the GPU in the dtype nearest by
                layout_distance (tokens, bytes moved, nrep and HD, each as |log2| ratio);
                an MHA shape's among the MHA groups, and an MQA shape's, in an op that sums
                replicas, among the MQA groups, where the dtype has any
    candidates  the LEADERS fastest configurations of each neighbour
    score(c)    the weighted geometric mean over the neighbours of c's slow-down there
                (c's time / the group's best), weight 2^-distance; where c was never
                measured at a neighbour its slow-down is taken as UNMEASURED, or as its
                family's best slow-down there where that is worse (a family that ran 2x behind
                at MQA is not assumed 1.1x behind for a configuration the tuner skipped)
    served      the candidates that can serve the requested shape, lowest score first;
                for an MQA shape of an op that sums replicas, the class rule's picks first
                (`serving_rank`)

A configuration that ran within a few per cent of the optimum everywhere near beats one that
won one group and was never tried elsewhere. Pure: a function of the index, cached by the
caller (`results.selection`). The exported header ships the same rule as a table of
layout-free configurations per (dtype, nrep class, HD class): `results.header_fallback`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import variants
from results.index import Candidate, TunedGroup
from variants import DType, Shape

NEIGHBOURS = 8  # tuned groups a score is taken over
LEADERS = 6  # configurations each neighbour proposes
UNMEASURED = 1.10  # the slow-down assumed where a configuration was never measured


def _log2_ratio(a: float, b: float) -> float:
    return abs(math.log2(a) - math.log2(b))


def layout_distance(shape: Shape, dtype: DType, tuned: Shape, tuned_dtype: DType) -> float:
    """How far a tuned shape is from a requested one whose layout differs: tokens (how the grid
    scales), bytes moved, replicas summed per K/V head and head size."""
    return (
        _log2_ratio(shape.tokens, tuned.tokens)
        + _log2_ratio(shape.bytes_moved(dtype), tuned.bytes_moved(tuned_dtype))
        + _log2_ratio(shape.nrep, tuned.nrep)
        + _log2_ratio(shape.HD, tuned.HD)
    )


@dataclass(frozen=True)
class Scored:
    """One configuration the rule considered: its score, and the neighbour that measured it
    closest to that neighbour's optimum (where it is served from)."""

    score: float
    group: TunedGroup
    candidate: Candidate
    measured_at: int  # neighbours that measured it


def summed_mqa(shape: Shape, op: str) -> bool:
    """Whether `shape` is MQA (one K/V head, several query heads) in an op that sums replicas:
    the layouts whose kernels other MQA layouts choose (`neighbours`, `serving_rank`)."""
    return shape.NH_KV == 1 and shape.nrep > 1 and variants.get_op(op).sums_replicas


def neighbours(groups: Iterable[TunedGroup], shape: Shape, dtype: DType) -> list[tuple[float, TunedGroup]]:
    """The NEIGHBOURS tuned groups in `dtype` nearest to `shape` by layout_distance."""
    of_dtype = [g for g in groups if g.dtype.name == dtype.name]
    # nrep 1 sums nothing (each op is then a copy or a rotation of the same bytes): only the
    # dtype's nrep-1 groups guide it, where it has any
    if shape.nrep == 1:
        of_dtype = [g for g in of_dtype if g.shape.nrep == 1] or of_dtype
    # MQA in an op that sums replicas: one K/V group sums every query head, so its kernels are
    # chosen by other MQA layouts, where the dtype has any (GQA neighbours, nearer by nrep or
    # tokens, served starcoder's layout a kernel 1.17x behind where MQA ones ran within 1.05x)
    elif of_dtype and summed_mqa(shape, of_dtype[0].op):
        of_dtype = [g for g in of_dtype if summed_mqa(g.shape, g.op)] or of_dtype
    near = [(layout_distance(shape, dtype, g.shape, g.dtype), g) for g in of_dtype]
    near.sort(key=lambda item: (item[0], item[1].key))
    return near[:NEIGHBOURS]


def rank(
    groups: Iterable[TunedGroup],
    shape: Shape,
    dtype: DType,
    families: Sequence[str] | None = None,
) -> list[Scored]:
    """The neighbours' leaders, best score first (only those of `families` where it is
    given); the caller skips those that cannot serve the shape."""
    near = neighbours(groups, shape, dtype)
    if not near:
        return []
    timed = [(2.0**-d, g, g.comparable_times) for d, g in near]
    total = sum(w for w, _, _ in timed)
    proposed: dict[str, Candidate] = {}
    for _, group, _ in timed:
        leaders = [c for c in group.candidates if families is None or c.family.name in families]
        for c in leaders[:LEADERS]:
            proposed.setdefault(c.config_key, c)
    family_best = [_family_best(group, times) for _, group, times in timed]
    scored = []
    for key in proposed:
        log_sum, measured, home, home_slowdown = 0.0, 0, None, math.inf
        family = proposed[key].family.name
        for (weight, group, times), best_of in zip(timed, family_best, strict=True):
            time = times.get(key)
            if time is None:  # at least UNMEASURED, and no faster than its family's best there
                slowdown = max(UNMEASURED, best_of.get(family, UNMEASURED))
            else:
                slowdown = time / group.best.time_ms
            log_sum += weight * math.log(slowdown)
            if time is not None:
                measured += 1
                if slowdown < home_slowdown:
                    home, home_slowdown = group, slowdown
        assert home is not None  # proposed by a neighbour, so measured there
        home_candidate = next(c for c in home.candidates if c.config_key == key)
        scored.append(Scored(math.exp(log_sum / total), home, home_candidate, measured))
    scored.sort(key=lambda s: (s.score, -s.measured_at, s.candidate.config_key))
    return scored


def _family_best(group: TunedGroup, times: dict[str, float]) -> dict[str, float]:
    """Each family's best slow-down measured at the group (its fastest configuration's time
    over the group's best)."""
    best: dict[str, float] = {}
    for key, time in times.items():
        family = key.partition("[")[0]
        best[family] = min(best.get(family, math.inf), time / group.best.time_ms)
    return best


# The header's table: a layout nobody tuned falls in one class per (nrep, HD, B*T), each served by
# the rule's pick among the op's families whose kernel does not compile the head layout in
# (`Op.layout_free_families`: the header cannot instantiate for a layout it never saw), ranked
# at the class's representative shape over the tuned groups of the class (`class_groups`).
NREP_CLASSES = ((1, 1), (2, 4), (5, 8), (9, 16), (17, 32), (33, 1 << 30))  # inclusive bounds
HD_CLASSES = ((1, 64), (65, 128), (129, 1 << 30))
TOKEN_CLASSES = ((1, 4096), (4097, 1 << 62))
_NREP_REPRESENTATIVE = {
    (1, 1): (32, 32),
    (2, 4): (32, 8),
    (5, 8): (48, 8),
    (9, 16): (96, 8),
    (17, 32): (232, 8),
    (33, 1 << 30): (64, 1),
}
_HD_REPRESENTATIVE = {(1, 64): 64, (65, 128): 128, (129, 1 << 30): 256}
_TOKEN_REPRESENTATIVE = {(1, 4096): 2048, (4097, 1 << 62): 8192}
Cell = tuple[int, int, int]  # indices into NREP_CLASSES, HD_CLASSES, TOKEN_CLASSES


def class_of(shape: Shape) -> Cell:
    """The (nrep, HD, B*T) class of a shape, as indices into the class tuples."""

    def find(classes: tuple[tuple[int, int], ...], value: int) -> int:
        return next(i for i, (lo, hi) in enumerate(classes) if lo <= value <= hi)

    return find(NREP_CLASSES, shape.nrep), find(HD_CLASSES, shape.HD), find(TOKEN_CLASSES, shape.tokens)


def representative(cell: Cell) -> Shape:
    NH, NH_KV = _NREP_REPRESENTATIVE[NREP_CLASSES[cell[0]]]
    tokens = _TOKEN_REPRESENTATIVE[TOKEN_CLASSES[cell[2]]]
    return Shape(1, tokens, NH, NH_KV, _HD_REPRESENTATIVE[HD_CLASSES[cell[1]]])


CLASS_PICKS = 2  # the class rule's configurations the header and /best try first


def class_rank(groups: Sequence[TunedGroup], shape: Shape, dtype: DType) -> list[Scored]:
    """The class rule: `rank` at `shape`, over the groups in `dtype` of its class (`class_of`,
    `class_groups`), among the families whose kernel reads the layout at run time
    (`Family.layout_free`), less the configurations that reject `shape` (a class fitted on
    every group holds MHA rows, whose nrep-1-only kernels must not serve nrep 8). The header
    ranks so at each class's `representative`; `/best` at the requested shape."""
    of_dtype = [g for g in groups if g.dtype.name == dtype.name]
    if not of_dtype:
        return []
    pool = class_groups(of_dtype, class_of(shape))
    free = sorted({c.family.name for g in pool for c in g.candidates if c.family.layout_free})
    ranked = rank(pool, shape, dtype, free)
    return [s for s in ranked if s.candidate.family.rejection(shape, dtype, s.candidate.config) is None]


MIN_CLASS_LAYOUTS = 2  # head layouts a class is fitted on, at least, where the store has them


def _layouts(groups: Iterable[TunedGroup]) -> int:
    return len({g.shape.layout for g in groups})


def class_groups(groups: Sequence[TunedGroup], cell: Cell) -> list[TunedGroup]:
    """The groups a class is fitted on: those of the class; where they hold fewer than
    MIN_CLASS_LAYOUTS head layouts, also those of the neighbouring nrep classes of its HD and
    B*T classes (one layout's winner is no rule: an MQA layout alone at nrep 16 would decide for
    GQA at nrep 12); where there are none, those of its nrep class; where that has none, every
    group. `rank` then weighs them by distance to the shape."""
    same = [g for g in groups if class_of(g.shape) == cell]
    if same and _layouts(same) < MIN_CLASS_LAYOUTS:
        near = {(cell[0] + step, cell[1], cell[2]) for step in (-1, 0, 1)}
        same = [g for g in groups if class_of(g.shape) in near]
    if not same:
        same = [g for g in groups if class_of(g.shape)[0] == cell[0]]
    return same or list(groups)


def serving_rank(groups: Sequence[TunedGroup], shape: Shape, dtype: DType) -> list[Scored]:
    """What serves a head layout nobody tuned, in the order tried: `rank`'s candidates, after
    the class rule's CLASS_PICKS (`class_rank` at the shape) for an MQA shape of an op that
    sums replicas. There a neighbour's winner that summed 8-48 replicas well can sum 71 badly:
    on the H200 hold-out runs of the four MQA layouts the neighbour rule's pick ran up to 1.13x
    (repkv_backward) and 1.18x (repkv_rope_backward) behind a tuning, the class rule's, fitted on
    the layout-free kernels of the class, up to 1.07x and 1.09x (docs/untuned.md)."""
    ranked = rank(groups, shape, dtype)
    if not (ranked and summed_mqa(shape, ranked[0].group.op)):
        return ranked
    return [*class_rank(groups, shape, dtype)[:CLASS_PICKS], *ranked]
