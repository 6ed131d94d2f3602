"""What every one-thread-per-word family shares, whatever its op: a thread per `vec_bytes` word
of `token_words` words a token, its grid and grid terms, its index type and its rules."""

from __future__ import annotations

import abc
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
    ceil_div,
    hint_codes,
    index_type,
    vector_reject,
)
from variants.shape import Shape

VEC_BYTES = (4, 8, 16)
# The space of a plain one-word-a-thread family (a family may add to it or say it its own way).
WORD_PARAMS = (
    Param("block", BLOCK_SIZES, "threads per block"),
    Param("vec_bytes", VEC_BYTES, "bytes per load and store"),
    Param("load", LOAD_HINTS, "global load: plain, __ldg or __ldcs"),
    Param("store", STORE_HINTS, "global store: plain or __stcs"),
)


class WordFamily(Family):
    """Template arguments (T, VEC_BYTES, LOAD, STORE, index type); params at least block,
    vec_bytes, load and store. A subclass says how many words a token has and which tensor is
    the largest (it bounds every offset); it may tighten the vector rule."""

    layout_free = True

    @abc.abstractmethod
    def token_words(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> int:
        """Threads per token: the words its thread grid runs over."""

    @abc.abstractmethod
    def largest_numel(self, shape: Shape) -> int:
        """Elements of the op's largest tensor."""

    def vector_rule(self, shape: Shape, dtype: DType, vec_bytes: int) -> str | None:
        return vector_reject(shape, dtype, vec_bytes)

    def reject(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> str | None:
        reason = self.vector_rule(shape, dtype, p["vec_bytes"])
        if reason is None and self.launch(shape, dtype, p, 0).grid > MAX_GRID:
            reason = f"{self.launch(shape, dtype, p, 0).grid} blocks of {p['block']} exceed CUDA's grid"
        return reason

    def template_args(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> list[str]:
        # the largest index: a thread's flat index, or an element offset of the largest tensor
        threads = self.launch(shape, dtype, p, 0).grid * p["block"]
        largest = max(threads, self.largest_numel(shape))
        return [dtype.ctype, str(p["vec_bytes"]), *hint_codes(p), index_type(largest)]

    def launch(self, shape: Shape, dtype: DType, p: Mapping[str, Any], sm_count: int) -> Launch:
        return Launch(ceil_div(shape.tokens * self.token_words(shape, dtype, p), p["block"]), p["block"])

    def grid_terms(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> tuple[GridTerm, ...]:
        return (GridTerm(1, self.token_words(shape, dtype, p), p["block"]),)
