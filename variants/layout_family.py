"""What the `flat` families of the chain's ops share: a 1-D grid over the words of one tensor
with `heads_in` heads a token (inp for the forward ops, dinp for the backward), WORDS words a
thread BLOCK apart, and the head layout (HDV words a head, HEADS = NH + 2*NH_KV heads a token,
NREP replicas) compiled in, so a word's (token, head, offset) costs multiplies, not divisions.
repkv_backward's own `flat` (variants/flat.py) is one too, over its own space."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from variants.dtypes import DType
from variants.family import (
    INT32_MAX,
    LOAD_HINTS,
    MAX_GRID,
    STORE_HINTS,
    Family,
    GridTerm,
    Launch,
    Param,
    grid_size,
    hint_codes,
    index_type,
    vector_reject,
    vector_words,
)
from variants.shape import Shape

LAYOUT_PARAMS = (
    # 1024 is left out: __launch_bounds__(1024) caps a thread at 64 registers, too few for
    # several words (and a group of replicas) in flight.
    Param("block", (64, 128, 256, 512), "threads per block (a template argument)"),
    Param("vec_bytes", (4, 8, 16), "bytes per load and store"),
    Param("words", (1, 2, 4), "words per thread, BLOCK apart (their loads in flight together)"),
    Param("load", LOAD_HINTS, "global load: plain, __ldg or __ldcs"),
    Param("store", STORE_HINTS, "global store: plain or __stcs"),
)


class LayoutFamily(Family):
    """Template arguments (T, VEC_BYTES, HDV, HEADS, NREP, BLOCK, WORDS, LOAD, STORE, index
    type). A subclass may tighten the vector rule (RoPE needs whole pairs a word)."""

    name = "flat"
    doc = "WORDS words a thread, the head layout compiled in"
    params = LAYOUT_PARAMS
    int_tokens = True  # the template takes a token's position (t = token % T) in int

    def vector_rule(self, shape: Shape, dtype: DType, vec_bytes: int) -> str | None:
        return vector_reject(shape, dtype, vec_bytes)

    def reject(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> str | None:
        reason = self.vector_rule(shape, dtype, p["vec_bytes"])
        if reason:
            return reason
        row = 3 * shape.NH * vector_words(shape, dtype, p["vec_bytes"])
        if row > INT32_MAX:  # 3*NH*HDV and HEADS*HDV are int constants of the template
            return f"a token's row of {row} words is past flat's 32-bit indices within a token"
        if p["block"] * p["words"] > 1024:  # measured: 512 threads of 4 words spill
            return f"{p['block']} threads of {p['words']} words: at most 1024 words a block"
        if self.int_tokens and shape.tokens > INT32_MAX:
            return f"{shape.tokens} tokens are past flat's 32-bit token index"
        if self.launch(shape, dtype, p, 0).grid > MAX_GRID:
            words = p["block"] * p["words"]
            return f"{shape.tokens} tokens in blocks of {words} words need over 2^31-1 blocks"
        return None

    def template_args(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> list[str]:
        grid = self.launch(shape, dtype, p, 0).grid
        elements = p["vec_bytes"] // dtype.itemsize
        # the largest index: an element of the replicated (B, T, 3, NH, HD) tensor, a thread's
        # word past the end, or the replicated word that a token past the end would address
        # (computed, never touched)
        largest = max(
            (shape.tokens + 1) * 3 * shape.NH * shape.HD,
            grid * p["block"] * p["words"] * elements,
        )
        return [
            dtype.ctype,
            str(p["vec_bytes"]),
            str(vector_words(shape, dtype, p["vec_bytes"])),
            str(shape.heads_in),
            str(shape.nrep),
            str(p["block"]),
            str(p["words"]),
            *hint_codes(p),
            index_type(largest),
        ]

    def launch(self, shape: Shape, dtype: DType, p: Mapping[str, Any], sm_count: int) -> Launch:
        return Launch(grid_size(self.grid_terms(shape, dtype, p), shape.tokens), p["block"])

    def grid_terms(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> tuple[GridTerm, ...]:
        words_per_token = shape.heads_in * vector_words(shape, dtype, p["vec_bytes"])
        return (GridTerm(1, words_per_token, p["block"] * p["words"]),)
