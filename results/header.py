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
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timezone

import variants
from results.header_fallback import FallbackTable, fallback_plan, fallback_table, render_tables
from results.index import StoreIndex
from results.recipe import GRID_LIMIT
from results.schema import L2_COLD, L2_FED
from results.selection import Choice, serving, source_gpus
from variants import DType, Family, GridTerm, Shape
from variants.family import grid_size

# B*T past which no row is asked about: far beyond any memory (2^40 tokens).
MAX_TOKENS = 2**40
LAUNCH_ARGUMENTS = "<<<grid, block, 0, stream>>>(dinp, dout, B, T, NH, NH_KV, HD); return;"
_CTYPE_ID = {"fp32": 0, "bf16": 1, "fp16": 2}


class ExportError(ValueError):
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


# --- the CUDA header -----------------------------------------------------------------------
def _kernel_sources(families: Iterable[str]) -> str:
    """common.cuh without its #includes (the header includes them once, outside the
    namespace), then each family's template."""
    common = variants.family.COMMON_HEADER.read_text()
    body = "\n".join(line for line in common.splitlines() if not line.startswith("#include"))
    templates = [variants.get_family(name).template_path.read_text() for name in families]
    return "\n".join([body, *templates])


def _row_table(rows: Sequence[Row]) -> str:
    lines = []
    for n, row in enumerate(rows):
        terms = list(row.grid_terms) + [GridTerm(0, 0, 1)] * (2 - len(row.grid_terms))
        ends = [s.max_tokens for s in row.segments] + [0] * (2 - len(row.segments))
        ratio = f"{row.ratio_to_copy:.3f}x copy" if row.ratio_to_copy else "copy not timed"
        lines.append(
            f"    /* {n:3d} {row.dtype} {row.tuned_shape}: {row.config_key}, "
            f"{row.time_ms:.4f} ms, {ratio} */\n"
            f"    {{{_CTYPE_ID[row.dtype]}, {row.NH}, {row.NH_KV}, {row.HD}, {row.tokens}LL, {row.block}, "
            f"{len(row.grid_terms)}, {{{terms[0].scale}LL, {terms[1].scale}LL}}, "
            f"{{{terms[0].a}LL, {terms[1].a}LL}}, {{{terms[0].b}LL, {terms[1].b}LL}}, "
            f"{len(row.segments)}, {{{ends[0]}LL, {ends[1]}LL}}}},"
        )
    return "\n".join(lines) if lines else "    {-1, 0, 0, 0, 0, 0, 0, {0, 0}, {0, 0}, {1, 1}, 0, {0, 0}},"


def _launchers(rows: Sequence[Row], fallback: FallbackTable) -> str:
    out = []
    for dtype_name, dtype in variants.DTYPES.items():
        cases = []
        for n, row in enumerate(rows):
            if row.dtype != dtype_name:
                continue
            for k, segment in enumerate(row.segments):
                cases.append(f"        case {n * 2 + k}: {segment.name_expression}{LAUNCH_ARGUMENTS}")
        generic = [
            f"        case {-1 - n}: {kernel.name_expression}{LAUNCH_ARGUMENTS}"
            for n, kernel in enumerate(fallback.kernels[dtype_name])
        ]
        body = "\n".join(cases + generic)
        out.append(
            f"inline void launch({dtype.ctype}* dinp, const {dtype.ctype}* dout, int B, int T, int NH, "
            "int NH_KV, int HD,\n"
            "                   const Plan& plan, cudaStream_t stream) {\n"
            "    const dim3 grid((unsigned)plan.grid), block((unsigned)plan.block);\n"
            "    switch (plan.kernel) {\n"
            f"{body}\n"
            "        default: break;\n"
            "    }\n"
            "}\n"
        )
    return "\n".join(out)


def render_header(table: ExportTable) -> str:
    families = sorted(table.source_hashes)
    sources = ", ".join(f"{name} {table.source_hashes[name]}" for name in families)
    names = ", ".join(table.gpu_names) or table.measured_gpu
    measured = (
        f"{table.measured_from} to {table.measured_to}" if table.measured_from else "dates not recorded"
    )
    stale = (
        f"\n// Rows of {', '.join(table.stale_sources)} were measured on an earlier source of their family."
        if table.stale_sources
        else ""
    )
    runner_up = (
        f"\n// {table.runner_up_rows} rows serve their shape's fastest configuration whose grid is a"
        "\n// function of B*T alone, not the tuned winner (of bulk, whose grid depends on the GPU)."
        if table.runner_up_rows
        else ""
    )
    fallback = (
        f"\n// GPU {table.gpu} has no results: these are {table.measured_gpu}'s."
        if table.gpu != table.measured_gpu
        else ""
    )
    fed = sum(row.l2 == L2_FED for row in table.rows)
    if fed:  # export --l2 fed: rows tuned for dout already in L2, as in a training step
        fallback += (
            f"\n// Tuned with dout just written (python -m tuner --l2 fed): {fed} of {len(table.rows)} rows."
        )
    return HEADER_TEMPLATE.format(
        gpu=table.measured_gpu,
        names=names,
        cc=table.compute_capability or "?",
        measured=measured,
        generated=table.generated,
        sources=sources,
        stale=stale,
        runner_up=runner_up,
        fallback=fallback,
        nrows=len(table.rows),
        kernels=_kernel_sources(families),
        rows=_row_table(table.rows),
        row_count=max(len(table.rows), 1),
        generic_tables=render_tables(table.fallback),
        launchers=_launchers(table.rows, table.fallback),
        grid_limit=GRID_LIMIT,
    )


HEADER_TEMPLATE = """\
// repkv_tuned.cuh: llm.c's repkv backward, tuned. Generated by `python -m tuner export
// --format cuda-header`; do not edit, export again.
//
// Measured on {gpu} ({names}, compute capability {cc}), {measured}; generated {generated}.
// Kernel sources (family sha256[:16]): {sources}.{stale}{runner_up}{fallback}
// {nrows} tuned shapes. Other B*T of a tuned (dtype, NH, NH_KV, HD) get the nearest tuned
// B*T's configuration (the rule of GET /best); other head layouts the layout rule's choice
// for their (nrep, HD) class, fitted on these measurements.
//
// Drop-in for llmc/repkv.cuh's backward:
//     void repkv_backward(floatX* dinp, const floatX* dout, int B, int T, int NH, int NH_KV, int HD)
// (floatX = float, __nv_bfloat16 or __half), plus an overload taking a cudaStream_t.
// dout: (B, T, 3, NH, HD); dinp: (B, T, NH + 2*NH_KV, HD); sums in fp32. Check errors as
// llm.c does, with cudaGetLastError() after the call.
#pragma once
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

namespace repkv_tuned {{

{kernels}

// One tuned (dtype, NH, NH_KV, HD, B*T): grid = sum_i scale[i] * ceil(B*T * a[i] / b[i]);
// instantiation k (of nseg) serves B*T <= seg_end[k].
struct Row {{
    int dtype, NH, NH_KV, HD;
    long long tokens;
    int block, nterms;
    long long scale[2], a[2], b[2];
    int nseg;
    long long seg_end[2];
}};

static const Row ROWS[{row_count}] = {{
{rows}
}};
static const int NROWS = {nrows};
{generic_tables}
template <typename T> struct DTypeId;
template <> struct DTypeId<float> {{ static constexpr int value = 0; }};
template <> struct DTypeId<__nv_bfloat16> {{ static constexpr int value = 1; }};
template <> struct DTypeId<__half> {{ static constexpr int value = 2; }};

// kernel >= 0: row kernel/2, its instantiation kernel%2; kernel < 0: generic number -1-kernel.
struct Plan {{
    int kernel;
    int row;  // -1 for the generic configuration
    long long grid;
    int block;
}};

inline long long cdiv(long long a, long long b) {{ return (a + b - 1) / b; }}

// The instantiation of row r that serves this B*T, or -1; its grid in *grid.
inline int serving(int r, long long tokens, long long* grid) {{
    const Row& row = ROWS[r];
    for (int k = 0; k < row.nseg; k++) {{
        if (tokens <= row.seg_end[k]) {{
            long long g = 0;
            for (int i = 0; i < row.nterms; i++) g += row.scale[i] * cdiv(tokens * row.a[i], row.b[i]);
            if (g > {grid_limit}LL) return -1;
            *grid = g;
            return k;
        }}
    }}
    return -1;
}}

inline Plan plan(int dtype, int B, int T, int NH, int NH_KV, int HD) {{
    const long long tokens = (long long)B * T;
    Plan best = {{0, -1, 0, 0}};
    double best_distance = 0.0;
    for (int r = 0; r < NROWS; r++) {{
        const Row& row = ROWS[r];
        if (row.dtype != dtype || row.NH != NH || row.NH_KV != NH_KV || row.HD != HD) continue;
        const double d = fabs(log2((double)tokens) - log2((double)row.tokens));
        long long grid = 0;
        if (best.row >= 0 && d >= best_distance - 1e-9) continue;  // ties keep the earlier row
        const int k = serving(r, tokens, &grid);
        if (k < 0) continue;
        best = Plan{{r * 2 + k, r, grid, row.block}};
        best_distance = d;
    }}
    if (best.row >= 0) return best;
    const int itemsize = dtype == 0 ? 4 : 2, nrep = NH / NH_KV;
    int nc = 0, hc = 0;
    while (nrep > NREP_UPTO[nc]) nc++;
    while (HD > HD_UPTO[hc]) hc++;
    const int* tries = CLASSES[dtype][nc][hc];
    for (int i = 0; tries[i] >= 0; i++) {{
        const Generic& g = GENERIC[dtype][tries[i]];
        if ((HD * itemsize) % g.width) continue;
        long long units = tokens * (NH + 2 * NH_KV);
        if (!g.per_head) units = units * HD * itemsize / g.width;
        const long long grid = cdiv(units, g.per_block);
        if (grid > {grid_limit}LL) continue;
        return Plan{{-1 - tries[i], -1, grid, g.block}};
    }}
    return best;
}}

{launchers}
}}  // namespace repkv_tuned

template <typename floatX>
inline void repkv_backward(floatX* dinp, const floatX* dout, int B, int T, int NH, int NH_KV, int HD,
                           cudaStream_t stream) {{
    if (B < 1 || T < 1 || NH < 1 || NH_KV < 1 || HD < 1 || NH % NH_KV != 0) {{
        fprintf(stderr, "repkv_backward: invalid shape B=%d T=%d NH=%d NH_KV=%d HD=%d "
                "(all positive, NH divisible by NH_KV)\\n", B, T, NH, NH_KV, HD);
        exit(EXIT_FAILURE);
    }}
    const repkv_tuned::Plan plan =
        repkv_tuned::plan(repkv_tuned::DTypeId<floatX>::value, B, T, NH, NH_KV, HD);
    repkv_tuned::launch(dinp, dout, B, T, NH, NH_KV, HD, plan, stream);
}}

template <typename floatX>
inline void repkv_backward(floatX* dinp, const floatX* dout, int B, int T, int NH, int NH_KV, int HD) {{
    repkv_backward(dinp, dout, B, T, NH, NH_KV, HD, (cudaStream_t)0);
}}
"""


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
