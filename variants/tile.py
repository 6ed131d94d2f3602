"""tile: Triton's layout in CUDA: a block per (dinp head, tile of tokens); the only runtime
division is the block's own, so short kernels on small shapes spend their time on memory."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from variants.dtypes import DType
from variants.family import (
    LOAD_HINTS,
    MAX_GRID,
    STORE_HINTS,
    Family,
    GridTerm,
    Launch,
    Param,
    ceil_div,
    grid_size,
    hint_codes,
    index_type,
    vector_reject,
    vector_words,
)
from variants.shape import Shape

# Words of a tile one thread moves (the kernel unrolls over them).
MAX_WORDS_PER_THREAD = 8
# Replicas a K/V thread loads before adding them (tile.cu's GROUP).
REPLICA_GROUP = 8
# Registers a K/V thread holds at once: its words of a replica group in flight and their fp32
# sums. Past this, ptxas spills (seen in `python -m tuner check`).
MAX_LIVE_REGISTERS = 128
# Which index of (head, tile) neighbouring blocks differ in: template code 0, 1.
ORDERS = ("tile_fastest", "head_fastest")
# Where the head layout comes from: the kernel's arguments, or its template (HEADS_C > 0).
HEAD_LAYOUTS = ("runtime", "compiled")


class Tile(Family):
    name = "tile"
    doc = "a block per (dinp head, tile of tokens), as Triton's kernel; no per-element division"
    params = (
        Param("block", (64, 128, 256), "threads per block (a template argument)"),
        Param("vec_bytes", (8, 16), "bytes per load and store"),
        Param("tokens", (1, 2, 4, 8, 16, 32), "tokens per tile (one block's share of a head)"),
        Param(
            "order",
            ORDERS,
            "neighbouring blocks: tiles of one head, or heads of one tile",
            earlier_rows="tile_fastest",
        ),
        Param(
            "heads",
            HEAD_LAYOUTS,
            "the head layout: kernel arguments, or compiled in (head-fastest blocks divide nothing)",
            earlier_rows="runtime",
        ),
        Param("load", LOAD_HINTS, "global load: plain, __ldg or __ldcs"),
        Param("store", STORE_HINTS, "global store: plain or __stcs"),
    )

    @classmethod
    def words_per_thread(cls, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> int:
        return ceil_div(p["tokens"] * vector_words(shape, dtype, p["vec_bytes"]), p["block"])

    @classmethod
    def live_registers(cls, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> int:
        in_flight = min(shape.nrep, REPLICA_GROUP) * p["vec_bytes"] // 4
        return cls.words_per_thread(shape, dtype, p) * (in_flight + p["vec_bytes"] // dtype.itemsize)

    def reject(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> str | None:
        reason = vector_reject(shape, dtype, p["vec_bytes"])
        if reason:
            return reason
        words = p["tokens"] * vector_words(shape, dtype, p["vec_bytes"])
        if 2 * words < p["block"]:
            return f"a tile of {p['tokens']} tokens is {words} words: most of {p['block']} threads would idle"
        per = self.words_per_thread(shape, dtype, p)
        if per > MAX_WORDS_PER_THREAD:
            return (
                f"a tile of {p['tokens']} tokens is {words} words: over {MAX_WORDS_PER_THREAD} per thread "
                f"of {p['block']}"
            )
        registers = self.live_registers(shape, dtype, p)
        if registers > MAX_LIVE_REGISTERS:
            return (
                f"{per} words of {min(shape.nrep, REPLICA_GROUP)} replicas in flight and their sums take "
                f"{registers} registers per thread (over {MAX_LIVE_REGISTERS}: spills)"
            )
        if self.launch(shape, dtype, p, 0).grid > MAX_GRID:
            return f"{shape.tokens} tokens in tiles of {p['tokens']} need a grid over 2^31-1 blocks"
        return None

    def template_args(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> list[str]:
        return [
            dtype.ctype,
            str(p["vec_bytes"]),
            str(vector_words(shape, dtype, p["vec_bytes"])),
            str(shape.nrep),
            str(p["tokens"]),
            str(p["block"]),
            str(ORDERS.index(p["order"])),
            *hint_codes(p),
            str(shape.heads_in if p["heads"] == "compiled" else 0),
            # the largest index is a word of dout, or a tile's last token past the end
            index_type(max(shape.dout_numel, (shape.tokens + p["tokens"]) * 3 * shape.NH * shape.HD)),
        ]

    def launch(self, shape: Shape, dtype: DType, p: Mapping[str, Any], sm_count: int) -> Launch:
        return Launch(grid_size(self.grid_terms(shape, dtype, p), shape.tokens), p["block"])

    def grid_terms(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> tuple[GridTerm, ...]:
        return (GridTerm(shape.heads_in, 1, p["tokens"]),)


FAMILY = Tile()
