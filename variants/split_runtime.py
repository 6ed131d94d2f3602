"""split_runtime: split's query-copy and K/V-sum blocks with the head layout at run time, one
instantiation for every layout (what the exported header launches for a layout nobody tuned);
ITEMS query words a copy thread, KV_ITEMS K/V words a reduce thread with GROUP replica loads
each in flight."""

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
    hint_codes,
    index_type,
    vector_reject,
    vector_words,
)
from variants.shape import Shape

# Up to __launch_bounds__(256) in the template (at 512 some instantiations spilled).
BLOCKS = (64, 128, 256)
# Replica words a reduce thread has in flight, kv_items * group, at most this (at 16-byte words
# and 64 in flight, the loads alone would take 256 registers)
MAX_IN_FLIGHT = 16


class SplitRuntime(Family):
    name = "split_runtime"
    doc = "split's copy and K/V-sum blocks, the head layout at run time: one kernel for any layout"
    layout_free = True
    params = (
        Param("block", BLOCKS, "threads per block (run time: not in the instantiation)"),
        Param("vec_bytes", (8, 16), "bytes per load and store"),
        Param("items", (2, 4, 8), "query words a copy thread moves, its loads in flight"),
        Param("group", (4, 8, 16), "replicas a reduce thread loads at once"),
        Param("kv_items", (1, 2, 4), "K/V words a reduce thread sums", earlier_rows=1),
        Param("load", LOAD_HINTS, "global load: plain, __ldg or __ldcs"),
        Param("store", STORE_HINTS, "global store: plain or __stcs"),
    )

    def blocks(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> tuple[int, int]:
        """(copy blocks, reduce blocks): its two grid terms at the shape's B*T."""
        q_term, kv_term = self.grid_terms(shape, dtype, p)
        return q_term.blocks(shape.tokens), kv_term.blocks(shape.tokens)

    def vector_rule(self, shape: Shape, dtype: DType, vec_bytes: int) -> str | None:
        return vector_reject(shape, dtype, vec_bytes)

    def reject(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> str | None:
        reason = self.vector_rule(shape, dtype, p["vec_bytes"])
        if reason is None and p["kv_items"] * p["group"] > MAX_IN_FLIGHT:
            loads = p["kv_items"] * p["group"]
            reason = f"kv_items x group is {loads} replica loads in flight, over {MAX_IN_FLIGHT}"
        grid = sum(self.blocks(shape, dtype, p)) if reason is None else 0
        if grid > MAX_GRID:
            reason = f"{grid} blocks of {p['block']} exceed CUDA's grid"
        return reason

    def template_args(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> list[str]:
        # the largest index: a copy thread's last word, or an element offset into dout
        q_blocks, kv_blocks = self.blocks(shape, dtype, p)
        per_block = p["block"] * max(p["items"], p["kv_items"])
        largest = max((q_blocks + kv_blocks) * per_block, shape.dout_numel)
        return [
            dtype.ctype,
            str(p["vec_bytes"]),
            str(p["items"]),
            str(p["group"]),
            str(p["kv_items"]),
            *hint_codes(p),
            index_type(largest),
        ]

    def launch(self, shape: Shape, dtype: DType, p: Mapping[str, Any], sm_count: int) -> Launch:
        return Launch(sum(self.blocks(shape, dtype, p)), p["block"])

    def grid_terms(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> tuple[GridTerm, ...]:
        words = vector_words(shape, dtype, p["vec_bytes"])
        return (
            GridTerm(1, shape.NH * words, p["block"] * p["items"]),
            GridTerm(1, 2 * shape.NH_KV * words, p["block"] * p["kv_items"]),
        )


FAMILY = SplitRuntime()
