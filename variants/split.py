"""split: query copy and K/V reduction in separate blocks; HD and nrep compile-time;
ITEMS vector loads in flight per thread before its first store."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from variants.dtypes import DType
from variants.family import (
    BLOCK_SIZES,
    LOAD_HINTS,
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


class Split(Family):
    name = "split"
    doc = "Q-copy and K/V-sum blocks apart; HD, nrep compile-time; ITEMS loads in flight"
    params = (
        # 1024 is left out: __launch_bounds__(1024) caps a thread at 64 registers, and with
        # several 16-byte words in flight that spills (seen in `python -m tuner check`).
        Param("block", BLOCK_SIZES[:-1], "threads per block (a template argument)"),
        Param("vec_bytes", (8, 16), "bytes per load and store"),
        Param("items", (1, 2, 4, 8), "vector loads in flight per thread"),
        Param("load", LOAD_HINTS, "global load: plain, __ldg or __ldcs"),
        Param("store", STORE_HINTS, "global store: plain or __stcs"),
    )

    def reject(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> str | None:
        return vector_reject(shape, dtype, p["vec_bytes"])

    @staticmethod
    def kv_items(shape: Shape, p: Mapping[str, Any]) -> int:
        return max(1, p["items"] // shape.nrep)

    def blocks(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> tuple[int, int]:
        words_per_head = vector_words(shape, dtype, p["vec_bytes"])
        q_words = shape.tokens * shape.NH * words_per_head
        kv_words = shape.tokens * 2 * shape.NH_KV * words_per_head
        q_blocks = ceil_div(q_words, p["block"] * p["items"])
        kv_blocks = ceil_div(kv_words, p["block"] * self.kv_items(shape, p))
        return q_blocks, kv_blocks

    def template_args(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> list[str]:
        q_blocks, kv_blocks = self.blocks(shape, dtype, p)
        per_block = p["block"] * max(p["items"], self.kv_items(shape, p))
        largest = max((q_blocks + kv_blocks) * per_block, shape.dout_numel)
        words_per_head = vector_words(shape, dtype, p["vec_bytes"])
        return [
            dtype.ctype,
            str(p["vec_bytes"]),
            str(words_per_head),
            str(shape.nrep),
            str(p["items"]),
            str(p["block"]),
            *hint_codes(p),
            index_type(largest),
        ]

    def launch(self, shape: Shape, dtype: DType, p: Mapping[str, Any], sm_count: int) -> Launch:
        return Launch(sum(self.blocks(shape, dtype, p)), p["block"])

    def grid_terms(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> tuple[GridTerm, ...]:
        words_per_head = vector_words(shape, dtype, p["vec_bytes"])
        return (
            GridTerm(1, shape.NH * words_per_head, p["block"] * p["items"]),
            GridTerm(1, 2 * shape.NH_KV * words_per_head, p["block"] * self.kv_items(shape, p)),
        )


FAMILY = Split()
