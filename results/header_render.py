"""The CUDA header's text for every op's export table (`results.header.export_header`): the
kernel templates (the shared helper code once), per op a namespace `repkv_tuned::op_<op>` with
its table of tuned rows, its fallback tables (`results.header_fallback`) and the dispatcher that
`results.header.plan` specifies (the tests hold the two equal), then llm.c's entry points."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import variants
from results.header import NO_KERNEL, ExportTable, HeaderExport, Row, complete
from results.header_fallback import FallbackTable, render_shared, render_tables
from results.header_text import HEADER_TEMPLATE, OP_TEMPLATE, entry_check
from results.recipe import GRID_LIMIT
from results.schema import L2_FED
from variants import Family, GridTerm, Op
from variants.family import COMMON_HEADER
from variants.rope_repkv_forward.rope import ROPE_HEADER

_CTYPE_ID = {"fp32": 0, "bf16": 1, "fp16": 2}


def source_parts(family: Family) -> tuple[Path, ...]:
    """The files a family's compilation unit is made of, shared helpers first (common.cuh, and
    rope.cuh for a RoPE op's), so that the header holds each file once."""
    template = family.template_path
    for parts in ((COMMON_HEADER, template), (COMMON_HEADER, ROPE_HEADER, template)):
        if family.source == "\n".join(p.read_text() for p in parts):
            return parts
    raise ValueError(f"{family.kernel}: its source is not common.cuh [+ rope.cuh] + its template")


def kernel_sources(families: Sequence[Family]) -> str:
    """Every file the families are made of, each once, helpers first, without their #includes
    (the header includes them once, outside the namespace)."""
    files = dict.fromkeys(p for family in families for p in source_parts(family))
    texts = []
    for path in sorted(files, key=lambda p: (p not in (COMMON_HEADER, ROPE_HEADER), p != COMMON_HEADER)):
        texts.append(
            "\n".join(line for line in path.read_text().splitlines() if not line.startswith("#include"))
        )
    return "\n".join(texts)


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


def parameters(op: Op, ctype: str) -> str:
    """The op's pointer parameters for element type `ctype`: output first, then the inputs."""
    return re.sub(r"\bT\*", f"{ctype}*", op.kernel_arguments[1:].split(", int B")[0])


def arguments(op: Op) -> str:
    return ", ".join([op.output.name, *(o.name for o in op.inputs), "B", "T", "NH", "NH_KV", "HD"])


def _launchers(op: Op, rows: Sequence[Row], fallback: FallbackTable) -> str:
    call = f"<<<grid, block, 0, stream>>>({arguments(op)}); return;"
    out = []
    for dtype_name, dtype in variants.DTYPES.items():
        cases = []
        for n, row in enumerate(rows):
            if row.dtype != dtype_name:
                continue
            for k, segment in enumerate(row.segments):
                cases.append(f"        case {n * 2 + k}: {segment.name_expression}{call}")
        generic = [
            f"        case {-1 - n}: {kernel.name_expression}{call}"
            for n, kernel in enumerate(fallback.kernels[dtype_name])
        ]
        body = "\n".join(cases + generic)
        out.append(
            f"inline void launch({parameters(op, dtype.ctype)}, int B, int T, int NH, int NH_KV, int HD,\n"
            "                   const Plan& plan, cudaStream_t stream) {\n"
            "    const dim3 grid((unsigned)plan.grid), block((unsigned)plan.block);\n"
            "    switch (plan.kernel) {\n"
            f"{body}\n"
            "        default: break;\n"
            "    }\n"
            "}\n"
        )
    return "\n".join(out)


def _op_section(table: ExportTable) -> str:
    op = variants.get_op(table.op)
    return OP_TEMPLATE.format(
        op=op.name,
        rows=_row_table(table.rows),
        row_count=max(len(table.rows), 1),
        nrows=len(table.rows),
        generic_tables=render_tables(table.fallback),
        launchers=_launchers(op, table.rows, table.fallback),
    )


def _entry_point(op: Op) -> str:
    """`void <op>(<output>, <inputs>, B, T, NH, NH_KV, HD, stream)`, llm.c's parameter list."""
    check = entry_check(op)
    rope = "true" if any(o.name == "freqs_cis" for o in op.inputs) else "false"  # HD must be even
    pointers = parameters(op, "floatX")
    text = (
        f"template <typename floatX>\n"
        f"inline void {op.name}({pointers},\n"
        f"{' ' * (len(op.name) + 13)}int B, int T, int NH, int NH_KV, int HD, cudaStream_t stream) {{\n"
        f'    repkv_tuned::check_shape("{op.name}", B, T, NH, NH_KV, HD, {rope});\n'
        f"{check}"
        f"    const int dtype = repkv_tuned::DTypeId<floatX>::value;\n"
        f"    const repkv_tuned::Plan plan = repkv_tuned::op_{op.name}::plan(dtype, B, T, NH, NH_KV, HD);\n"
        f"    if (plan.kernel == repkv_tuned::NO_KERNEL)\n"
        f'        repkv_tuned::no_kernel("{op.name}", B, T, NH, NH_KV, HD);\n'
        f"    repkv_tuned::op_{op.name}::launch({arguments(op)}, plan, stream);\n"
        "}\n"
    )
    if op.name == variants.DEFAULT_OP:  # the stream-less overload the header always had
        text += (
            "\ntemplate <typename floatX>\n"
            f"inline void {op.name}({pointers}, int B, int T, int NH, int NH_KV, int HD) {{\n"
            f"    {op.name}({arguments(op)}, (cudaStream_t)0);\n"
            "}\n"
        )
    return text


def _notes(table: ExportTable) -> str:
    """The comment lines on one op's table."""
    name = table.op
    if not table.rows:
        return f"// {name}: no tuned shapes; every shape gets its generic chain."
    names = ", ".join(table.gpu_names) or table.measured_gpu
    measured = (
        f"{table.measured_from} to {table.measured_to}" if table.measured_from else "dates not recorded"
    )
    sources = ", ".join(f"{f} {h}" for f, h in sorted(table.source_hashes.items()))
    lines = [
        f"// {name}: {len(table.rows)} tuned shapes, measured on {table.measured_gpu} ({names}, compute",
        f"//   capability {table.compute_capability or '?'}), {measured}. Sources (sha256[:16]): {sources}.",
    ]
    if table.stale_sources:
        lines.append(
            f"// Rows of {', '.join(table.stale_sources)} were measured on an earlier source of their family."
        )
    if table.runner_up_rows:
        lines.append(
            f"// {table.runner_up_rows} rows serve their shape's fastest configuration whose grid is a"
        )
        lines.append(
            "// function of B*T alone, not the tuned winner (of bulk, whose grid depends on the GPU)."
        )
    if table.gpu != table.measured_gpu:
        lines.append(f"// GPU {table.gpu} has no {name} results: these are {table.measured_gpu}'s.")
    fed = sum(row.l2 == L2_FED for row in table.rows)
    if fed:  # export --l2 fed: rows tuned with their input already in L2, as in a training step
        written, n = variants.get_op(name).inputs[0].name, len(table.rows)
        lines.append(f"// Tuned with {written} just written (python -m tuner --l2 fed): {fed} of {n} rows.")
    return "\n".join(lines)


def render_header(export: HeaderExport | ExportTable) -> str:
    """The header for every op's table (a lone op's table: the other ops generic)."""
    if isinstance(export, ExportTable):
        export = complete(export)
    ops = [variants.get_op(name) for name in export.tables]
    families = [
        op.family(f) for op, t in zip(ops, export.tables.values(), strict=True) for f in t.source_hashes
    ]
    return HEADER_TEMPLATE.format(
        gpu=export.gpu,
        generated=export.generated,
        notes="\n".join(_notes(t) for t in export.tables.values()),
        kernels=kernel_sources(families),
        shared_tables=render_shared(),
        grid_limit=GRID_LIMIT,
        no_kernel=NO_KERNEL,
        sections="\n".join(_op_section(t) for t in export.tables.values()),
        entry_points="\n".join(_entry_point(op) for op in ops),
    )
