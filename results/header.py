"""Export one GPU's winners as a self-contained CUDA header for llm.c, a drop-in for
`llmc/repkv.cuh` (`repkv_forward`, `repkv_backward`) with the fused RoPE pair
(`rope_repkv_forward`, `repkv_rope_backward`), or as the same tables in JSON.

Each op (`variants.OPS`) has its own table (`export_table` over `StoreIndex.for_op(op)`;
`export_header` gathers them); an op without tuned rows on the GPU gets an empty one and is
served by its fixed generic chain (`results.header_fallback.fallback_table` with no groups). What
follows holds per op.

A table holds one row per tuned (dtype, NH, NH_KV, HD, B*T) of the GPU: the configuration
`results.selection.select` serves for that tuned shape, or, where that is of a family whose
grid is not a function of B*T alone (bulk's depends on the GPU), the fastest of that shape
whose grid is.
Kernels depend on B and T only through B*T, so where two tuned shapes share a B*T the first in
(B, T) order is kept. At run time the header applies the rule of `GET /best` within the rows of
the requested dtype and head layout (tier 0): the row of the same B*T, else the nearest by
|log2(B*T / B'*T')| (ties to the earlier row), skipping a row whose kernel cannot serve that B*T
(its index type or CUDA's grid limit). A shape whose dtype and head layout were never tuned gets
the layout rule's choice for its (nrep, HD) class among the op's kernels that read the layout at
run time, fitted on the store at export time (`results.header_fallback`), never one fixed
configuration.

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
# Plan.kernel where no kernel serves the shape (a RoPE op's odd HD): the header refuses it.
NO_KERNEL = -(2**31) + 1


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
    op: str  # variants.OPS
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


@dataclass(frozen=True)
class HeaderExport:
    """Every op's table for one GPU: what one header holds."""

    gpu: str
    generated: str
    tables: dict[str, ExportTable]  # op -> its table, in variants.OPS order

    def as_json(self) -> str:
        body = {
            "gpu": self.gpu,
            "generated": self.generated,
            "ops": {o: asdict(t) for o, t in self.tables.items()},
        }
        return json.dumps(body, indent=2, sort_keys=False)


def _layout_shape(row_shape: Shape, tokens: int) -> Shape:
    """A shape of the same head layout with B=1, T=tokens. The kernels see B and T only as
    B*T, so a probe skips Shape's validation: its B*T may pass the limits of a request
    (variants.shape), and the layout is a tuned row's."""
    probe = object.__new__(Shape)
    for name, value in zip(("B", "T", "NH", "NH_KV", "HD"), (1, tokens, *row_shape.layout), strict=True):
        object.__setattr__(probe, name, value)
    return probe


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
    """The winners of `gpu` (through the one GPU fallback policy) of the index's op as header rows."""
    op = variants.get_op(index.op)
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
    fallback = fallback_table(groups, op)
    used = sorted({r.family for r in rows} | _generic_families(fallback))
    return ExportTable(
        op=op.name,
        gpu=gpu,
        measured_gpu=measured,
        gpu_names=summary.gpu_names if summary else (),
        compute_capability=summary.compute_capability if summary else None,
        measured_from=min(times).date().isoformat() if times else None,
        measured_to=max(times).date().isoformat() if times else None,
        source_hashes={name: op.family(name).source_hash for name in used},
        stale_sources=tuple(sorted(stale)),
        runner_up_rows=demoted,
        generated=_now(),
        rows=tuple(rows),
        fallback=fallback,
    )


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _generic_families(fallback: FallbackTable) -> set[str]:
    return {k.config.family for kernels in fallback.kernels.values() for k in kernels}


def generic_export(op_name: str, gpu: str) -> ExportTable:
    """The table of an op without tuned rows: its generic chain serves every shape."""
    op = variants.get_op(op_name)
    fallback = fallback_table((), op)
    return ExportTable(
        op=op.name,
        gpu=gpu,
        measured_gpu=gpu,
        gpu_names=(),
        compute_capability=None,
        measured_from=None,
        measured_to=None,
        source_hashes={name: op.family(name).source_hash for name in sorted(_generic_families(fallback))},
        stale_sources=(),
        generated=_now(),
        runner_up_rows=0,
        rows=(),
        fallback=fallback,
    )


def export_header(
    index: StoreIndex,
    gpu: str,
    dtypes: Sequence[str] | None = None,
    other_gpus: bool = False,
    l2: str = L2_COLD,
) -> HeaderExport:
    """Every op's table for `gpu` (`export_table` over the op's index in L2 state `l2`); an op
    without rows there gets `generic_export`. ExportError only where no op has any."""
    tables: dict[str, ExportTable] = {}
    errors: dict[str, str] = {}
    for name in variants.OPS:
        try:
            tables[name] = export_table(index.for_op(name).in_state(l2), gpu, dtypes, other_gpus)
        except ExportError as exc:
            errors[name] = str(exc)
    if not tables:
        reasons = set(errors.values())
        raise ExportError(
            reasons.pop() if len(reasons) == 1 else "; ".join(f"{o}: {e}" for o, e in errors.items())
        )
    full = {name: tables.get(name) or generic_export(name, gpu) for name in variants.OPS}
    return HeaderExport(gpu=gpu, generated=_now(), tables=full)


def complete(table: ExportTable) -> HeaderExport:
    """One op's table in a whole header: the other ops served by their generic chains."""
    tables = {name: table if name == table.op else generic_export(name, table.gpu) for name in variants.OPS}
    return HeaderExport(gpu=table.gpu, generated=table.generated, tables=tables)


@dataclass(frozen=True)
class Plan:
    """The header's dispatch decision, as `repkv_tuned::op_<op>::plan` makes it (kernel >= 0:
    row kernel // 2, instantiation kernel % 2; kernel < 0: generic number -1 - kernel;
    NO_KERNEL: none serves)."""

    kernel: int
    row: int
    grid: int
    block: int


def plan(table: ExportTable, dtype: str, shape: Shape) -> Plan:
    """What the exported header launches for (dtype, shape) of the table's op: the
    specification that the C++ dispatcher is tested against."""
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
    found = fallback_plan(table.fallback, variants.get_dtype(dtype), shape)
    if found is None:
        return Plan(NO_KERNEL, -1, 0, 0)
    n, grid, block = found
    return Plan(-1 - n, -1, grid, block)
