"""What the exported header launches for a head layout it holds no row of: the layout rule
(`results.layout_rule`) fitted on the store at export time, shipped as a small table.

A layout falls in one class per (nrep, HD) (`layout_rule.NREP_CLASSES` x `HD_CLASSES`). Each
class of each dtype lists the generic kernels to try, in order: the rule's FALLBACK_PICKS best
configurations at the class's representative shape among the families whose kernels take the
head layout at run time (`layout_rule.LAYOUT_FREE_FAMILIES`), then the fixed chain of
`results.selection.generic_configs` (vec at block 256, widest word first, then gather, which
serves every shape). The first kernel whose word divides a head and whose grid fits serves.

A kernel's grid, for any layout at run time: units / per_block blocks of `block` threads, units
being the tokens' words of dinp (B*T*(NH+2*NH_KV)*HD*itemsize / width), or for warp_per_head
their heads (B*T*(NH+2*NH_KV)).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import variants
from results import layout_rule
from results.index import TunedGroup
from results.recipe import GRID_LIMIT
from results.selection import generic_configs
from variants import Config, DType, Shape

FALLBACK_PICKS = 2  # the rule's configurations per class, before the fixed chain
# Indices reach past 2^31 here, so every generic instantiation takes 64-bit ones.
_HUGE = Shape(1, 2**22, 8, 8, 128)


@dataclass(frozen=True)
class GenericKernel:
    config: Config
    width: int  # bytes per load and store (the element size for gather)
    per_head: bool  # its grid counts heads (warp_per_head), else words of dinp
    per_block: int  # units per block
    block: int
    name_expression: str  # the 64-bit-index instantiation

    @property
    def config_key(self) -> str:
        return self.config.key

    def grid(self, shape: Shape, dtype: DType) -> int | None:
        """Its grid for the shape, or None where it cannot serve it (a word that does not divide
        a head, or a grid past CUDA's limit)."""
        if (shape.HD * dtype.itemsize) % self.width:
            return None
        units = shape.tokens * shape.heads_in
        if not self.per_head:
            units = units * shape.HD * dtype.itemsize // self.width
        grid = -(-units // self.per_block)
        return grid if grid <= GRID_LIMIT else None


def generic_kernel(config: Config, dtype: DType) -> GenericKernel:
    family = variants.get_family(config.family)
    p = config.values
    expression = family.name_expression(_HUGE, dtype, config)
    if config.family == "warp_per_head":
        return GenericKernel(config, p["vec_bytes"], True, p["warps"], 32 * p["warps"], expression)
    width = p.get("vec_bytes", dtype.itemsize)
    return GenericKernel(config, width, False, p["block"], p["block"], expression)


@dataclass(frozen=True)
class FallbackTable:
    """Per dtype: its generic kernels, and per (nrep class, HD class) the kernels' indices in
    the order they are tried."""

    kernels: dict[str, tuple[GenericKernel, ...]]
    classes: dict[str, tuple[tuple[tuple[int, ...], ...], ...]]


def fallback_table(groups: Sequence[TunedGroup]) -> FallbackTable:
    """The table for one GPU's tuned groups."""
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


def fallback_plan(table: FallbackTable, dtype: DType, shape: Shape) -> tuple[int, int, int]:
    """(kernel index, grid, block) the header launches for a layout it holds no row of."""
    nrep, hd = class_of(shape)
    for n in table.classes[dtype.name][nrep][hd]:
        kernel = table.kernels[dtype.name][n]
        grid = kernel.grid(shape, dtype)
        if grid is not None:
            return n, grid, kernel.block
    raise AssertionError("gather serves every shape")


def render_tables(table: FallbackTable) -> str:
    """The C tables: GENERIC[dtype][kernel] and CLASSES[dtype][nrep class][HD class][try]."""
    width = max(len(k) for k in table.kernels.values())
    tries = max(len(c) for per in table.classes.values() for row in per for c in row) + 1
    kernel_rows, class_rows = [], []
    for name in variants.DTYPES:
        entries = [
            f"{{{k.width}, {int(k.per_head)}, {k.per_block}, {k.block}}} /* {k.config_key} */"
            for k in table.kernels[name]
        ]
        entries += ["{0, 0, 1, 1}"] * (width - len(entries))
        kernel_rows.append(f"    /* {name} */ {{\n        " + ",\n        ".join(entries) + "},")
        per = []
        for row in table.classes[name]:
            cells = ["{" + ", ".join(str(n) for n in (*c, *[-1] * (tries - len(c)))) + "}" for c in row]
            per.append("{" + ", ".join(cells) + "}")
        class_rows.append(f"    /* {name} */ {{" + ", ".join(per) + "},")
    nrep_bounds = ", ".join(str(hi) for _, hi in layout_rule.NREP_CLASSES)
    hd_bounds = ", ".join(str(hi) for _, hi in layout_rule.HD_CLASSES)
    return (
        "// A layout without rows: its class (nrep, HD upper bounds below) lists generic kernels to try.\n"
        f"static const long long NREP_UPTO[{len(layout_rule.NREP_CLASSES)}] = {{{nrep_bounds}}};\n"
        f"static const int HD_UPTO[{len(layout_rule.HD_CLASSES)}] = {{{hd_bounds}}};\n"
        "struct Generic { int width, per_head, per_block, block; };\n"
        f"static const Generic GENERIC[3][{width}] = {{\n" + "\n".join(kernel_rows) + "\n};\n"
        f"static const int CLASSES[3][{len(layout_rule.NREP_CLASSES)}][{len(layout_rule.HD_CLASSES)}]"
        f"[{tries}] = {{\n" + "\n".join(class_rows) + "\n};\n"
    )
