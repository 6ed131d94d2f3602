"""The CUDA header's text for an export table (`results.header.export_table`): the kernel
templates, the table of tuned rows, the layout rule's fallback tables (`results.header_fallback`)
and the dispatcher that `results.header.plan` specifies (the tests hold the two equal)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import variants
from results.header import ExportTable, Row
from results.header_fallback import FallbackTable, render_tables
from results.recipe import GRID_LIMIT
from results.schema import L2_FED
from variants import GridTerm

LAUNCH_ARGUMENTS = "<<<grid, block, 0, stream>>>(dinp, dout, B, T, NH, NH_KV, HD); return;"
_CTYPE_ID = {"fp32": 0, "bf16": 1, "fp16": 2}


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
