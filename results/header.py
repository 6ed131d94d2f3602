"""Export one GPU's winners as a self-contained CUDA header for llm.c (`llmc/repkv.cuh`'s
`repkv_backward(dinp, dout, B, T, NH, NH_KV, HD)`), or as the same table in JSON.

The table holds one row per tuned (dtype, NH, NH_KV, HD, B*T) of the GPU: the configuration
`results.selection.select` serves for that tuned shape, or, where that is of a family whose
grid is not a function of B*T alone (bulk's depends on the GPU), the fastest of that shape
whose grid is.
Kernels depend on B and T only through B*T, so where two tuned shapes share a B*T the first in
(B, T) order is kept. At run time the header applies the rule of `GET /best` within the rows of
the requested dtype and head layout (tier 0): the row of the same B*T, else the nearest by
|log2(B*T / B'*T')| (ties to the earlier row), skipping a row whose kernel cannot serve that B*T
(its index type or CUDA's grid limit). A shape whose dtype and head layout were never tuned gets
the layout rule's choice for its (nrep, HD) class, fitted on the store at export time
(`results.header_fallback`), never one fixed configuration.

A row's launch is data, not code: grid = sum over its terms (scale, a, b) of
scale * ceil(B*T*a / b) (the family's `grid_terms`), and its kernel instantiations are listed
per range of B*T (the 32-bit-index instantiation up to the B*T where an index could pass 2^31,
the 64-bit one beyond), found by asking the family for its name expression at each B*T.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timezone

import variants
from results.header_fallback import FallbackTable, fallback_plan, fallback_table
from results.index import StoreIndex
from results.recipe import GRID_LIMIT
from results.schema import L2_COLD
from results.selection import Choice, serving, source_gpus
from variants import DType, Family, GridTerm, Shape
from variants.errors import RepkvTuneError
from variants.family import grid_size

# B*T past which no row is asked about: far beyond any memory (2^40 tokens).
MAX_TOKENS = 2**40


class ExportError(RepkvTuneError, ValueError):
    """Nothing to export for what was asked (the message says what is available)."""


@dataclass(frozen=True)
class Segment:
    max_tokens: int  # this instantiation serves B*T up to here (inclusive)
    name_expression: str


@dataclass(frozen=True)
class Row:
    dtype: str
    NH: int
    NH_KV: int
    HD: int
    tokens: int
    tuned_shape: str
    family: str
    config_key: str
    block: int
    grid_terms: tuple[GridTerm, ...]
    segments: tuple[Segment, ...]
    time_ms: float
    ratio_to_copy: float | None
    baseline_ms: float | None
    l2: str = L2_COLD  # the L2 state its configuration was tuned in (results.schema.L2_STATES)


@dataclass(frozen=True)
class ExportTable:
    gpu: str
    measured_gpu: str
    gpu_names: tuple[str, ...]
    compute_capability: str | None
    measured_from: str | None
    measured_to: str | None
    source_hashes: dict[str, str]  # family -> hash of the source embedded in the header
    stale_sources: tuple[str, ...]  # families whose rows were measured on another source
    generated: str
    runner_up_rows: int  # rows whose tuned winner the header cannot launch: a slower one serves
    rows: tuple[Row, ...]
    fallback: FallbackTable  # layouts without rows (results.header_fallback)

    def as_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=False)


def _layout_shape(row_shape: Shape, tokens: int) -> Shape:
    """A shape of the same head layout with B=1, T=tokens. The kernels see B and T only as
    B*T, so probing a B*T past the limits of a request (variants.shape) skips Shape's validation."""
    try:
        return Shape(1, tokens, row_shape.NH, row_shape.NH_KV, row_shape.HD)
    except variants.InvalidShape:
        pass
    probe = object.__new__(Shape)
    for name, value in zip(("B", "T", "NH", "NH_KV", "HD"), (1, tokens, *_layout(row_shape)), strict=True):
        object.__setattr__(probe, name, value)
    return probe


def _layout(shape: Shape) -> tuple[int, int, int]:
    return shape.NH, shape.NH_KV, shape.HD


def _expression_at(family: Family, shape: Shape, dtype: DType, config: variants.Config) -> str | None:
    if family.rejection(shape, dtype, config) is not None:
        return None
    if family.geometry(shape, dtype, config, 0).grid > GRID_LIMIT:
        return None
    return family.name_expression(shape, dtype, config)


def segments(family: Family, shape: Shape, dtype: DType, config: variants.Config) -> tuple[Segment, ...]:
    """The instantiations serving B*T = 1.. in order, each up to the last B*T it serves.

    An instantiation changes only where an index outgrows its type, so each serves one range;
    the ranges' ends are found by bisection."""

    def at(tokens: int) -> str | None:
        return _expression_at(family, _layout_shape(shape, tokens), dtype, config)

    found: list[Segment] = []
    low = 1
    current = at(low)
    while current is not None:
        if at(MAX_TOKENS) == current:
            found.append(Segment(MAX_TOKENS, current))
            break
        lo, hi = low, MAX_TOKENS  # at(lo) == current != at(hi)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if at(mid) == current:
                lo = mid
            else:
                hi = mid
        found.append(Segment(lo, current))
        low, current = hi, at(hi)
    return tuple(found)


def _grid_terms(choice: Choice) -> tuple[GridTerm, ...] | None:
    candidate = choice.candidate
    return candidate.family.grid_terms(choice.group.shape, choice.group.dtype, candidate.config.values)


def export_table(
    index: StoreIndex, gpu: str, dtypes: Sequence[str] | None = None, other_gpus: bool = False
) -> ExportTable:
    """The winners of `gpu` (through the one GPU fallback policy) as header rows."""
    labels = source_gpus(index, gpu, other_gpus)
    if not labels:
        available = ", ".join(index.available_gpus()) or "none"
        raise ExportError(f"no results for GPU {gpu!r}; the results hold {available}")
    measured = labels[0]
    wanted = set(dtypes or variants.DTYPES)
    groups = [g for g in index.groups_of(measured) if g.dtype.name in wanted]
    if not groups:
        raise ExportError(f"no tuned shapes of GPU {measured!r} in {', '.join(sorted(wanted))}")
    rows: list[Row] = []
    seen: set[tuple[str, int, int, int, int]] = set()
    stale: set[str] = set()
    times = []
    demoted = 0
    for group in groups:  # sorted by (shape, dtype): the first of equal B*T is kept
        shape, dtype = group.shape, group.dtype
        key = (dtype.name, shape.NH, shape.NH_KV, shape.HD, shape.tokens)
        if key in seen:
            continue
        # The group's fastest configuration whose grid is a function of B*T alone (a family
        # without grid_terms, such as bulk, cannot serve other B*T from the header).
        launchable = ((c, _grid_terms(c)) for c in serving([group], shape, dtype))
        choice, terms = next(((c, t) for c, t in launchable if t is not None), (None, None))
        if choice is None:
            continue
        if choice.rank:
            demoted += 1
        seen.add(key)
        candidate, recipe = choice.candidate, choice.recipe
        family = candidate.family
        if not recipe.source_current:
            stale.add(family.name)
        if candidate.timestamp is not None:
            times.append(candidate.timestamp)
        rows.append(
            Row(
                dtype=dtype.name,
                NH=shape.NH,
                NH_KV=shape.NH_KV,
                HD=shape.HD,
                tokens=shape.tokens,
                tuned_shape=shape.key,
                family=family.name,
                config_key=candidate.config_key,
                block=recipe.block,
                grid_terms=tuple(terms),
                segments=segments(family, shape, dtype, candidate.config),
                time_ms=candidate.time_ms,
                ratio_to_copy=candidate.ratio_to_copy,
                baseline_ms=group.baseline_ms,
                l2=group.l2,
            )
        )
    summary = index.gpus.get(measured)
    fallback = fallback_table(groups)
    generic = {k.config_key.split("[")[0] for kernels in fallback.kernels.values() for k in kernels}
    used = sorted({r.family for r in rows} | generic)
    return ExportTable(
        gpu=gpu,
        measured_gpu=measured,
        gpu_names=summary.gpu_names if summary else (),
        compute_capability=summary.compute_capability if summary else None,
        measured_from=min(times).date().isoformat() if times else None,
        measured_to=max(times).date().isoformat() if times else None,
        source_hashes={name: variants.get_family(name).source_hash for name in used},
        stale_sources=tuple(sorted(stale)),
        runner_up_rows=demoted,
        generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        rows=tuple(rows),
        fallback=fallback,
    )


@dataclass(frozen=True)
class Plan:
    """The header's dispatch decision, as `repkv_tuned::plan` makes it (kernel >= 0: row
    kernel // 2, instantiation kernel % 2; kernel < 0: generic number -1 - kernel)."""

    kernel: int
    row: int
    grid: int
    block: int


def plan(table: ExportTable, dtype: str, shape: Shape) -> Plan:
    """What the exported header launches for (dtype, shape): the specification that the C++
    dispatcher is tested against."""
    tokens = shape.tokens
    best: Plan | None = None
    best_distance = 0.0
    for r, row in enumerate(table.rows):
        if (row.dtype, row.NH, row.NH_KV, row.HD) != (dtype, shape.NH, shape.NH_KV, shape.HD):
            continue
        d = abs(math.log2(tokens) - math.log2(row.tokens))
        if best is not None and d >= best_distance - 1e-9:
            continue
        for k, segment in enumerate(row.segments):
            if tokens <= segment.max_tokens:
                grid = grid_size(row.grid_terms, tokens)
                if grid <= GRID_LIMIT:
                    best, best_distance = Plan(r * 2 + k, r, grid, row.block), d
                break
    if best is not None:
        return best
    n, grid, block = fallback_plan(table.fallback, variants.get_dtype(dtype), shape)
    return Plan(-1 - n, -1, grid, block)
