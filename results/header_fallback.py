"""What the exported header launches for a head layout it holds no row of: for every op the
layout rule (`results.layout_rule`) fitted on the store at export time, shipped as a small table
per (dtype, nrep class, HD class, B*T class) of kernels that read the head layout at run time.

A layout falls in one class per (nrep, HD, B*T) (`layout_rule.class_of`). Each class of each
dtype lists the generic kernels to try, in order: the rule's CLASS_PICKS best configurations
at the class's representative shape, over the class's tuned groups, among the op's layout-free
families (`Op.layout_free_families`: repkv_backward's `split_runtime`, `warp_sum_runtime`, `vec`,
`warp_per_head`, `gather`, `naive`; the forward ops' `replicate`, `vec`, `naive`, and
`rope_repkv_forward`'s `flat_runtime`), then the op's fixed chain of
`results.selection.generic_configs` (vec at block 256, widest word first, then gather or
llm.c's kernel). The first kernel whose word divides a head and whose grid fits serves. An op without
rows on the GPU gets the fixed chain alone.

A kernel's grid, for any layout at run time, is the sum over its terms of ceil(units / per_block),
units being B*T times a count of heads (NH, 2*NH_KV, NH + 2*NH_KV or 3*NH: `HEADS`), times the
head's words of `width` bytes unless the term counts heads (warp_per_head). The terms are read off
the family's own `grid_terms` at probe shapes (`generic_kernel`), so a new layout-free family
needs nothing here. A kernel serves where `align` bytes divide a head (its word; a RoPE pair at
least), for a kernel of 32-bit indices (`index32`, naive), where its threads and the larger
tensor (B, T, 3, NH, HD) stay below 2^31, and for one whose warps hold whole heads (`warp`,
warp_sum_runtime), where a head's words divide 32.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import variants
from results import layout_rule
from results.index import TunedGroup
from results.recipe import GRID_LIMIT
from results.selection import generic_configs
from variants import Config, DType, Family, Op, Shape
from variants.errors import RepkvTuneError
from variants.rope_repkv_forward.rope import RopeFamily
from variants.shape import INT32_MAX

# Indices reach past 2^31 here, so every generic instantiation takes 64-bit ones (a kernel of
# 32-bit indices only, naive, is named at _SMALL). HD 64: at most 32 words of any width a head,
# which a warp of warp_sum_runtime holds.
_HUGE = Shape(1, 2**23, 8, 8, 64)
_SMALL = Shape(1, 1, 8, 8, 64)
# Two layouts whose head counts NH, 2*NH_KV, NH + 2*NH_KV and 3*NH all differ, the second with
# twice the HD: a grid term that doubles with HD counts words, else heads.
_PROBE = Shape(1, 1, 8, 2, 64)
_PROBE_WIDE = Shape(1, 1, 8, 2, 128)
# A term's heads a token, by its code in the C table (`Generic::heads`).
HEADS: tuple[tuple[str, Callable[[Shape], int]], ...] = (
    ("NH", lambda s: s.NH),
    ("2*NH_KV", lambda s: 2 * s.NH_KV),
    ("NH + 2*NH_KV", lambda s: s.heads_in),
    ("3*NH", lambda s: 3 * s.NH),
)
MAX_TERMS = 2


class NotLayoutFree(RepkvTuneError, ValueError):
    """A configuration whose grid is no function of the head layout that the header can compute."""


@dataclass(frozen=True)
class Term:
    heads: int  # index into HEADS
    words: bool  # units are the heads' words of `width` bytes (else the heads themselves)
    per_block: int


@dataclass(frozen=True)
class GenericKernel:
    config: Config
    width: int  # bytes per load and store (the element size for gather and naive)
    block: int
    terms: tuple[Term, ...]
    name_expression: str  # the 64-bit-index instantiation (naive: its only one)
    align: int = 0  # bytes that must divide a head (0: width)
    index32: bool = False  # 32-bit indices: threads and (B, T, 3, NH, HD) below 2^31
    warp: bool = False  # a warp holds whole heads: a head's words divide 32 (`Family.warp_heads`)

    @property
    def config_key(self) -> str:
        return self.config.key

    def grid(self, shape: Shape, dtype: DType) -> int | None:
        """Its grid for the shape, or None where it cannot serve it (a word that does not divide
        a head, or a grid past CUDA's limit)."""
        if (shape.HD * dtype.itemsize) % (self.align or self.width):
            return None
        if self.warp and 32 % (shape.HD * dtype.itemsize // self.width):
            return None
        grid = 0
        for term in self.terms:
            units = shape.tokens * HEADS[term.heads][1](shape)
            if term.words:
                units = units * shape.HD * dtype.itemsize // self.width
            grid += -(-units // term.per_block)
        if grid > GRID_LIMIT:
            return None
        if self.index32 and max(grid * self.block, shape.dout_numel) > INT32_MAX:
            return None
        return grid


def _terms(family: Family, dtype: DType, config: Config, width: int) -> tuple[Term, ...]:
    """The family's grid terms as counts of heads or of their words, found at two probe layouts."""
    narrow = family.grid_terms(_PROBE, dtype, config.values)
    wide = family.grid_terms(_PROBE_WIDE, dtype, config.values)
    if not narrow or len(narrow) > MAX_TERMS or len(wide) != len(narrow):
        raise NotLayoutFree(f"{config.key}: its grid is no sum of at most {MAX_TERMS} terms")
    terms = []
    for a, b in zip(narrow, wide, strict=True):
        words = b.a == 2 * a.a
        per_head = _PROBE.HD * dtype.itemsize // width if words else 1
        heads = [n for n, (_, count) in enumerate(HEADS) if count(_PROBE) * per_head == a.a]
        if a.scale != 1 or a.b != b.b or len(heads) != 1:
            raise NotLayoutFree(f"{config.key}: grid term {a} is no count of heads or their words")
        terms.append(Term(heads[0], words, a.b))
    return tuple(terms)


def generic_kernel(config: Config, dtype: DType, op: Op | None = None) -> GenericKernel:
    op = op or variants.get_op()
    family = op.family(config.family)
    if not family.layout_free:
        raise NotLayoutFree(f"{config.key}: family {family.name} compiles the head layout in")
    p = config.values
    index32 = family.rejection(_HUGE, dtype, config) is not None  # no 64-bit instantiation
    expression = family.name_expression(_SMALL if index32 else _HUGE, dtype, config)
    width = p.get("vec_bytes", dtype.itemsize)
    align = max(width, 2 * dtype.itemsize) if isinstance(family, RopeFamily) else width
    block = family.geometry(_SMALL, dtype, config, 0).block
    terms = _terms(family, dtype, config, width)
    return GenericKernel(config, width, block, terms, expression, align, index32, family.warp_heads)


def op_generic_configs(op: Op, dtype: DType) -> list[Config]:
    """An op's generic chain (`results.selection.generic_configs`) of layout-free families (an
    op whose baseline compiles the layout in has none past its `vec`), each `vec` width that
    its family takes in this dtype at any B*T."""
    return [
        c
        for c in generic_configs(dtype, op)
        if op.family(c.family).layout_free
        and (c.family != "vec" or op.family("vec").rejection(_HUGE, dtype, c) is None)
    ]


@dataclass(frozen=True)
class FallbackTable:
    """Per dtype: its generic kernels, and per class (`layout_rule.class_of`: nrep, HD, B*T)
    the kernels' indices in the order they are tried."""

    kernels: dict[str, tuple[GenericKernel, ...]]
    classes: dict[str, tuple[tuple[tuple[tuple[int, ...], ...], ...], ...]]  # [nrep][HD][B*T] -> tries

    def tries(self, dtype: str, cell: layout_rule.Cell) -> tuple[int, ...]:
        return self.classes[dtype][cell[0]][cell[1]][cell[2]]


def cells() -> list[layout_rule.Cell]:
    """Every class, in the order of the C table (nrep, then HD, then B*T)."""
    return [
        (n, h, t)
        for n in range(len(layout_rule.NREP_CLASSES))
        for h in range(len(layout_rule.HD_CLASSES))
        for t in range(len(layout_rule.TOKEN_CLASSES))
    ]


def fallback_table(groups: Sequence[TunedGroup], op: Op | None = None) -> FallbackTable:
    """The table for one GPU's tuned groups of `op` (default repkv_backward): per class the
    layout rule's picks among the op's layout-free families over the class's groups, then its
    fixed chain (the chain alone where `groups` is empty)."""
    op = op or variants.get_op()
    kernels: dict[str, tuple[GenericKernel, ...]] = {}
    classes: dict[str, tuple[tuple[tuple[tuple[int, ...], ...], ...], ...]] = {}
    n, h, t = (len(c) for c in (layout_rule.NREP_CLASSES, layout_rule.HD_CLASSES, layout_rule.TOKEN_CLASSES))
    for name, dtype in variants.DTYPES.items():
        configs: list[Config] = []
        chain = op_generic_configs(op, dtype)
        tries: dict[layout_rule.Cell, tuple[int, ...]] = {}
        for cell in cells():
            ranked = layout_rule.class_rank(groups, layout_rule.representative(cell), dtype)
            picks = [s.candidate.config for s in ranked[: layout_rule.CLASS_PICKS]]
            order = list(dict.fromkeys([*picks, *chain]))
            for config in order:
                if config not in configs:
                    configs.append(config)
            tries[cell] = tuple(configs.index(c) for c in order)
        kernels[name] = tuple(generic_kernel(c, dtype, op) for c in configs)
        classes[name] = tuple(
            tuple(tuple(tries[(a, b, c)] for c in range(t)) for b in range(h)) for a in range(n)
        )
    return FallbackTable(kernels, classes)


def fallback_plan(table: FallbackTable, dtype: DType, shape: Shape) -> tuple[int, int, int] | None:
    """(kernel index, grid, block) the header launches for a layout it holds no row of; None
    where no generic kernel serves (never for repkv_backward, whose gather serves every shape;
    for a RoPE op, an odd HD)."""
    for n in table.tries(dtype.name, layout_rule.class_of(shape)):
        kernel = table.kernels[dtype.name][n]
        grid = kernel.grid(shape, dtype)
        if grid is not None:
            return n, grid, kernel.block
    return None


def _bounds(classes: tuple[tuple[int, int], ...]) -> str:
    return ", ".join(str(hi) for _, hi in classes)


def render_shared() -> str:
    """The class bounds and the generic kernel's record, shared by every op's tables."""
    heads = ", ".join(f"{n} {text}" for n, (text, _) in enumerate(HEADS))
    nrep, hd, tokens = (layout_rule.NREP_CLASSES, layout_rule.HD_CLASSES, layout_rule.TOKEN_CLASSES)
    return (
        "// A layout without rows: its class (nrep, HD, B*T upper bounds) lists generic kernels to try.\n"
        f"static const long long NREP_UPTO[{len(nrep)}] = {{{_bounds(nrep)}}};\n"
        f"static const int HD_UPTO[{len(hd)}] = {{{_bounds(hd)}}};\n"
        f"static const long long TOKENS_UPTO[{len(tokens)}] = {{{_bounds(tokens)}}};\n"
        "// grid = sum over its nterms terms of ceil(units / per_block), units = B*T times the heads of\n"
        f"// heads[i] ({heads}), times their words of `width` bytes where words[i]. It serves\n"
        "// where `align` bytes divide a head, index32, where its threads and (B, T, 3, NH, HD) stay\n"
        "// below 2^31, and warp, where a head's words divide a warp's 32 lanes.\n"
        f"struct Generic {{ int width, align, block, index32, warp, nterms, heads[{MAX_TERMS}], "
        f"words[{MAX_TERMS}]; long long per_block[{MAX_TERMS}]; }};\n"
    )


def _render_kernel(k: GenericKernel) -> str:
    terms = [*k.terms, *[Term(0, False, 1)] * (MAX_TERMS - len(k.terms))]
    heads = ", ".join(str(t.heads) for t in terms)
    words = ", ".join(str(int(t.words)) for t in terms)
    per_block = ", ".join(str(t.per_block) for t in terms)
    return (
        f"{{{k.width}, {k.align or k.width}, {k.block}, {int(k.index32)}, {int(k.warp)}, {len(k.terms)}, "
        f"{{{heads}}}, {{{words}}}, {{{per_block}}}}} /* {k.config_key} */"
    )


def render_tables(table: FallbackTable) -> str:
    """One op's C tables: GENERIC[dtype][kernel] and CLASSES[dtype][nrep][HD][B*T class][try]."""
    width = max(len(k) for k in table.kernels.values())
    tries = max(len(table.tries(d, c)) for d in table.classes for c in cells()) + 1
    empty = "{1, 1, 1, 0, 0, 0, {0, 0}, {0, 0}, {1, 1}}"
    n, h, t = (len(c) for c in (layout_rule.NREP_CLASSES, layout_rule.HD_CLASSES, layout_rule.TOKEN_CLASSES))
    kernel_rows, class_rows = [], []
    for name in variants.DTYPES:
        entries = [_render_kernel(k) for k in table.kernels[name]]
        entries += [empty] * (width - len(entries))
        kernel_rows.append(f"    /* {name} */ {{\n        " + ",\n        ".join(entries) + "},")

        def cell(c: layout_rule.Cell, name: str = name) -> str:
            listed = table.tries(name, c)
            return "{" + ", ".join(str(k) for k in (*listed, *[-1] * (tries - len(listed)))) + "}"

        nested = [
            "{" + ", ".join("{" + ", ".join(cell((a, b, c)) for c in range(t)) + "}" for b in range(h)) + "}"
            for a in range(n)
        ]
        class_rows.append(f"    /* {name} */ {{" + ", ".join(nested) + "},")
    return (
        f"static const Generic GENERIC[3][{width}] = {{\n" + "\n".join(kernel_rows) + "\n};\n"
        f"static const int CLASSES[3][{n}][{h}][{t}][{tries}] = {{\n" + "\n".join(class_rows) + "\n};\n"
    )
