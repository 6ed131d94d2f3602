"""split_runtime: split's query-copy and K/V-sum blocks with the head layout at run time, one
instantiation for every layout (what the exported header launches for a layout nobody tuned);
ITEMS query words a copy thread, GROUP replica loads in flight a reduce thread."""

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
    hint_codes,
    index_type,
    vector_reject,
    vector_words,
)
from variants.shape import Shape

# Up to __launch_bounds__(256) in the template (at 512 some instantiations spilled).
BLOCKS = (64, 128, 256)


class SplitRuntime(Family):
    name = "split_runtime"
    doc = "split's copy and K/V-sum blocks, the head layout at run time: one kernel for any layout"
    layout_free = True
    params = (
        Param("block", BLOCKS, "threads per block (run time: not in the instantiation)"),
        Param("vec_bytes", (8, 16), "bytes per load and store"),
        Param("items", (2, 4, 8), "query words a copy thread moves, its loads in flight"),
        Param("group", (4, 8, 16), "replicas a reduce thread loads at once"),
        Param("load", LOAD_HINTS, "global load: plain, __ldg or __ldcs"),
        Param("store", STORE_HINTS, "global store: plain or __stcs"),
    )

    def blocks(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> tuple[int, int]:
        words = vector_words(shape, dtype, p["vec_bytes"])
        q_blocks = ceil_div(shape.tokens * shape.NH * words, p["block"] * p["items"])
        kv_blocks = ceil_div(shape.tokens * 2 * shape.NH_KV * words, p["block"])
        return q_blocks, kv_blocks

    def reject(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> str | None:
        reason = vector_reject(shape, dtype, p["vec_bytes"])
        if reason is None and sum(self.blocks(shape, dtype, p)) > MAX_GRID:
            reason = f"{sum(self.blocks(shape, dtype, p))} blocks of {p['block']} exceed CUDA's grid"
        return reason

    def template_args(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> list[str]:
        # the largest index: a copy thread's last word, or an element offset into dout
        q_blocks, kv_blocks = self.blocks(shape, dtype, p)
        largest = max((q_blocks + kv_blocks) * p["block"] * p["items"], shape.dout_numel)
        return [
            dtype.ctype,
            str(p["vec_bytes"]),
            str(p["items"]),
            str(p["group"]),
            *hint_codes(p),
            index_type(largest),
        ]

    def launch(self, shape: Shape, dtype: DType, p: Mapping[str, Any], sm_count: int) -> Launch:
        return Launch(sum(self.blocks(shape, dtype, p)), p["block"])

    def grid_terms(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> tuple[GridTerm, ...]:
        words = vector_words(shape, dtype, p["vec_bytes"])
        return (
            GridTerm(1, shape.NH * words, p["block"] * p["items"]),
            GridTerm(1, 2 * shape.NH_KV * words, p["block"]),
        )


FAMILY = SplitRuntime()
