"""What the exported header launches for a head layout it holds no row of: for repkv_backward
the layout rule (`results.layout_rule`) fitted on the store at export time, shipped as a small
table; for the other ops (`generic_table`) their generic chain, `vec` at block 256 widest word
first, then `naive` at block 128 (llm.c's kernel, which serves within its 32-bit indices).

A layout falls in one class per (nrep, HD) (`layout_rule.NREP_CLASSES` x `HD_CLASSES`). Each
class of each dtype lists the generic kernels to try, in order: the rule's FALLBACK_PICKS best
configurations at the class's representative shape among the families whose kernels take the
head layout at run time (`layout_rule.LAYOUT_FREE_FAMILIES`), then the fixed chain of
`results.selection.generic_configs` (vec at block 256, widest word first, then gather, which
serves every shape). The first kernel whose word divides a head and whose grid fits serves.

A kernel's grid, for any layout at run time: units / per_block blocks of `block` threads, units
being the tokens' words of the op's output (B*T*heads*HD*itemsize / width, heads NH+2*NH_KV for
dinp or 3*NH for out), or for warp_per_head their heads (B*T*heads). It serves where `align`
bytes divide a head (its word; a RoPE pair at least) and, for a kernel of 32-bit indices
(`index32`, naive), where its threads and the larger tensor (B, T, 3, NH, HD) stay below 2^31.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import variants
from results import layout_rule
from results.index import TunedGroup
from results.recipe import GRID_LIMIT
from results.selection import generic_configs
from variants import Config, DType, Op, Shape
from variants.rope_repkv_forward.rope import RopeFamily
from variants.shape import INT32_MAX

FALLBACK_PICKS = 2  # the rule's configurations per class, before the fixed chain
# Indices reach past 2^31 here, so every generic instantiation takes 64-bit ones (a kernel of
# 32-bit indices only, naive, is named at _SMALL).
_HUGE = Shape(1, 2**22, 8, 8, 128)
_SMALL = Shape(1, 1, 8, 8, 128)
# A layout whose 3*NH and NH+2*NH_KV differ: which of the two an op's output has per token.
_PROBE = Shape(1, 1, 8, 2, 64)
NAIVE_BLOCK = 128  # llm.c's hard-coded block size


@dataclass(frozen=True)
class GenericKernel:
    config: Config
    width: int  # bytes per load and store (the element size for gather and naive)
    per_head: bool  # its grid counts heads (warp_per_head), else words of the output
    per_block: int  # units per block
    block: int
    name_expression: str  # the 64-bit-index instantiation (naive: its only one)
    align: int = 0  # bytes that must divide a head (0: width)
    out_heads: bool = False  # the output has 3*NH heads a token (else NH + 2*NH_KV)
    index32: bool = False  # 32-bit indices: threads and (B, T, 3, NH, HD) below 2^31

    @property
    def config_key(self) -> str:
        return self.config.key

    def grid(self, shape: Shape, dtype: DType) -> int | None:
        """Its grid for the shape, or None where it cannot serve it (a word that does not divide
        a head, or a grid past CUDA's limit)."""
        if (shape.HD * dtype.itemsize) % (self.align or self.width):
            return None
        units = shape.tokens * (3 * shape.NH if self.out_heads else shape.heads_in)
        if not self.per_head:
            units = units * shape.HD * dtype.itemsize // self.width
        grid = -(-units // self.per_block)
        if grid > GRID_LIMIT:
            return None
        if self.index32 and max(grid * self.block, shape.dout_numel) > INT32_MAX:
            return None
        return grid


def generic_kernel(config: Config, dtype: DType, op: Op | None = None) -> GenericKernel:
    op = op or variants.get_op()
    family = op.family(config.family)
    p = config.values
    index32 = family.rejection(_HUGE, dtype, config) is not None  # no 64-bit instantiation
    expression = family.name_expression(_SMALL if index32 else _HUGE, dtype, config)
    out_heads = op.output.numel(_PROBE) == 3 * _PROBE.NH * _PROBE.HD
    if config.family == "warp_per_head":
        return GenericKernel(config, p["vec_bytes"], True, p["warps"], 32 * p["warps"], expression)
    width = p.get("vec_bytes", dtype.itemsize)
    align = max(width, 2 * dtype.itemsize) if isinstance(family, RopeFamily) else width
    return GenericKernel(config, width, False, p["block"], p["block"], expression, align, out_heads, index32)


def op_generic_configs(op: Op, dtype: DType) -> list[Config]:
    """An op's generic chain (`results.selection.generic_configs`), each `vec` width that its
    family takes in this dtype at any B*T."""
    return [
        c
        for c in generic_configs(dtype, op)
        if c.family != "vec" or op.family("vec").rejection(_HUGE, dtype, c) is None
    ]


@dataclass(frozen=True)
class FallbackTable:
    """Per dtype: its generic kernels, and per (nrep class, HD class) the kernels' indices in
    the order they are tried."""

    kernels: dict[str, tuple[GenericKernel, ...]]
    classes: dict[str, tuple[tuple[tuple[int, ...], ...], ...]]


def generic_table(op: Op) -> FallbackTable:
    """An op's generic chain (`op_generic_configs`), the same in every class."""
    kernels: dict[str, tuple[GenericKernel, ...]] = {}
    classes: dict[str, tuple[tuple[tuple[int, ...], ...], ...]] = {}
    for name, dtype in variants.DTYPES.items():
        kernels[name] = tuple(generic_kernel(c, dtype, op) for c in op_generic_configs(op, dtype))
        chain = tuple(range(len(kernels[name])))
        classes[name] = tuple(tuple(chain for _ in layout_rule.HD_CLASSES) for _ in layout_rule.NREP_CLASSES)
    return FallbackTable(kernels, classes)


def fallback_table(groups: Sequence[TunedGroup], op: Op | None = None) -> FallbackTable:
    """The table for one GPU's tuned groups of `op` (default repkv_backward, the only op
    with a layout rule; the others get `generic_table`)."""
    if op is not None and op.name != variants.DEFAULT_OP:
        return generic_table(op)
    kernels: dict[str, tuple[GenericKernel, ...]] = {}
    classes: dict[str, tuple[tuple[tuple[int, ...], ...], ...]] = {}
    for name, dtype in variants.DTYPES.items():
        configs: list[Config] = []
        per_class = []
        for nrep_class in layout_rule.NREP_CLASSES:
            row = []
            for hd_class in layout_rule.HD_CLASSES:
                shape = layout_rule.representative(nrep_class, hd_class)
                ranked = layout_rule.rank(groups, shape, dtype, layout_rule.LAYOUT_FREE_FAMILIES)
                picks = [s.candidate.config for s in ranked[:FALLBACK_PICKS]]
                order = list(dict.fromkeys([*picks, *generic_configs(dtype)]))
                for config in order:
                    if config not in configs:
                        configs.append(config)
                row.append(tuple(configs.index(c) for c in order))
            per_class.append(tuple(row))
        kernels[name] = tuple(generic_kernel(c, dtype) for c in configs)
        classes[name] = tuple(per_class)
    return FallbackTable(kernels, classes)


def class_of(shape: Shape) -> tuple[int, int]:
    """(nrep class, HD class) of a shape, as indices into layout_rule's class tuples."""
    nrep = next(i for i, (lo, hi) in enumerate(layout_rule.NREP_CLASSES) if lo <= shape.nrep <= hi)
    hd = next(i for i, (lo, hi) in enumerate(layout_rule.HD_CLASSES) if lo <= shape.HD <= hi)
    return nrep, hd


def fallback_plan(table: FallbackTable, dtype: DType, shape: Shape) -> tuple[int, int, int] | None:
    """(kernel index, grid, block) the header launches for a layout it holds no row of; None
    where no generic kernel serves (never for repkv_backward, whose gather serves every shape;
    for a RoPE op, an odd HD)."""
    nrep, hd = class_of(shape)
    for n in table.classes[dtype.name][nrep][hd]:
        kernel = table.kernels[dtype.name][n]
        grid = kernel.grid(shape, dtype)
        if grid is not None:
            return n, grid, kernel.block
    return None


def render_shared() -> str:
    """The class bounds and the generic kernel's record, shared by every op's tables."""
    nrep_bounds = ", ".join(str(hi) for _, hi in layout_rule.NREP_CLASSES)
    hd_bounds = ", ".join(str(hi) for _, hi in layout_rule.HD_CLASSES)
    return (
        "// A layout without rows: its class (nrep, HD upper bounds below) lists generic kernels to try.\n"
        f"static const long long NREP_UPTO[{len(layout_rule.NREP_CLASSES)}] = {{{nrep_bounds}}};\n"
        f"static const int HD_UPTO[{len(layout_rule.HD_CLASSES)}] = {{{hd_bounds}}};\n"
        "// units a token: the output's heads (3*NH if out_heads, else NH + 2*NH_KV), times its words of\n"
        "// `width` bytes unless per_head; it serves where `align` bytes divide a head and, index32,\n"
        "// where its threads and (B, T, 3, NH, HD) stay below 2^31.\n"
        "struct Generic { int width, align, per_head, per_block, block, out_heads, index32; };\n"
    )


def render_tables(table: FallbackTable) -> str:
    """One op's C tables: GENERIC[dtype][kernel] and CLASSES[dtype][nrep class][HD class][try]."""
    width = max(len(k) for k in table.kernels.values())
    tries = max(len(c) for per in table.classes.values() for row in per for c in row) + 1
    kernel_rows, class_rows = [], []
    for name in variants.DTYPES:
        entries = [
            f"{{{k.width}, {k.align or k.width}, {int(k.per_head)}, {k.per_block}, {k.block}, "
            f"{int(k.out_heads)}, {int(k.index32)}}} /* {k.config_key} */"
            for k in table.kernels[name]
        ]
        entries += ["{1, 1, 0, 1, 1, 0, 0}"] * (width - len(entries))
        kernel_rows.append(f"    /* {name} */ {{\n        " + ",\n        ".join(entries) + "},")
        per = []
        for row in table.classes[name]:
            cells = ["{" + ", ".join(str(n) for n in (*c, *[-1] * (tries - len(c)))) + "}" for c in row]
            per.append("{" + ", ".join(cells) + "}")
        class_rows.append(f"    /* {name} */ {{" + ", ".join(per) + "},")
    return (
        f"static const Generic GENERIC[3][{width}] = {{\n" + "\n".join(kernel_rows) + "\n};\n"
        f"static const int CLASSES[3][{len(layout_rule.NREP_CLASSES)}][{len(layout_rule.HD_CLASSES)}]"
        f"[{tries}] = {{\n" + "\n".join(class_rows) + "\n};\n"
    )
