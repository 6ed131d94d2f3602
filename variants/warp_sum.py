"""warp_sum: split's query-copy blocks, and each K/V group summed by one warp that reads its
replicas as one contiguous run, then adds its lanes by shuffles; HD and nrep compiled in, for
large nrep (MQA) where a word holds a small part of a head (HD / word a divisor of 32)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from variants.dtypes import DType
from variants.family import (
    BLOCK_SIZES,
    LOAD_HINTS,
    MAX_GRID,
    STORE_HINTS,
    Family,
    GridTerm,
    Launch,
    Param,
    hint_codes,
    index_type,
    vector_reject,
    vector_words,
)
from variants.shape import Shape

WARP = 32


def warp_reject(shape: Shape, dtype: DType, vec_bytes: int) -> str | None:
    """Why a warp cannot hold whole heads of vec_bytes words at this shape, or None."""
    reason = vector_reject(shape, dtype, vec_bytes)
    if reason is not None:
        return reason
    words = vector_words(shape, dtype, vec_bytes)
    if WARP % words:
        return (
            f"HD={shape.HD} is {words} words of {vec_bytes} bytes, which do not divide a warp's {WARP} lanes"
        )
    return None


class WarpSum(Family):
    name = "warp_sum"
    doc = "Q-copy blocks; a warp per K/V group reads its replicas as one run, sums by shuffles"
    warp_heads = True
    params = (
        # 32 holds one warp, too few for the copy blocks; 1024 caps a thread at 64 registers
        Param("block", BLOCK_SIZES[1:-1], "threads per block (a template argument)"),
        Param("vec_bytes", (8, 16), "bytes per load and store"),
        Param("items", (1, 2, 4, 8), "vector loads in flight per thread (copy and sum)"),
        Param("load", LOAD_HINTS, "global load: plain, __ldg or __ldcs"),
        Param("store", STORE_HINTS, "global store: plain or __stcs"),
        # a reduce warp's loads are LOADS/ITEMS round trips in a row: copy blocks run last keep
        # the GPU busy while the last reduce blocks drain (docs/ops.md, "The reduce blocks' tail")
        Param("tail", (0, 1, 2, 4), "eighths of the copy blocks run after the reduce blocks", earlier_rows=0),
    )

    def vector_rule(self, shape: Shape, dtype: DType, vec_bytes: int) -> str | None:
        return warp_reject(shape, dtype, vec_bytes)

    def reject(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> str | None:
        reason = self.vector_rule(shape, dtype, p["vec_bytes"])
        grid = sum(self.blocks(shape, dtype, p)) if reason is None else 0
        if grid > MAX_GRID:
            reason = f"{grid} blocks of {p['block']} exceed CUDA's grid"
        return reason

    def blocks(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> tuple[int, int]:
        """(copy blocks, reduce blocks): its two grid terms at the shape's B*T."""
        q_term, kv_term = self.grid_terms(shape, dtype, p)
        return q_term.blocks(shape.tokens), kv_term.blocks(shape.tokens)

    def template_args(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> list[str]:
        q_blocks, kv_blocks = self.blocks(shape, dtype, p)
        largest = max((q_blocks + kv_blocks) * p["block"] * p["items"], shape.dout_numel)
        return [
            dtype.ctype,
            str(p["vec_bytes"]),
            str(vector_words(shape, dtype, p["vec_bytes"])),
            str(shape.nrep),
            str(p["items"]),
            str(p["block"]),
            str(p["tail"]),
            *hint_codes(p),
            index_type(largest),
        ]

    def launch(self, shape: Shape, dtype: DType, p: Mapping[str, Any], sm_count: int) -> Launch:
        return Launch(sum(self.blocks(shape, dtype, p)), p["block"])

    def grid_terms(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> tuple[GridTerm, ...]:
        words = vector_words(shape, dtype, p["vec_bytes"])
        return (
            GridTerm(1, shape.NH * words, p["block"] * p["items"]),
            GridTerm(1, 2 * shape.NH_KV, p["block"] // WARP),
        )


FAMILY = WarpSum()
