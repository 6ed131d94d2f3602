"""split_runtime: repkv_backward's split_runtime with the rotation: query-rotate and K/V
sum-and-rotate blocks apart, the head layout at run time, one instantiation for every layout
(what the exported header launches for a layout nobody tuned, MQA's many replicas included);
KV_ITEMS K/V words a reduce thread, for small nrep."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from variants.dtypes import DType
from variants.family import GridTerm, Param, vector_words
from variants.rope_repkv_forward.rope import RopeFamily
from variants.shape import INT32_MAX, Shape
from variants.split_runtime import SplitRuntime as RepkvSplitRuntime

# Replica words a reduce thread has in flight, kv_items * group, at most this (at 16-byte words
# and 64 in flight, the loads alone would take 256 registers)
MAX_IN_FLIGHT = 16


class SplitRuntime(RopeFamily, RepkvSplitRuntime):
    doc = "Q-rotate and K/V-sum-rotate blocks apart, the head layout at run time: one kernel for any layout"
    kernel_prefix = "repkv_rope_backward"
    template_dir = Path(__file__).resolve().parent
    params = (
        *RepkvSplitRuntime.params,
        Param("kv_items", (1, 2, 4), "K/V words a reduce thread sums", earlier_rows=1),
    )

    def reject(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> str | None:
        """split_runtime's rules, with whole RoPE pairs a word (RopeFamily.vector_rule)."""
        if shape.tokens > INT32_MAX:  # a token's position t = token % T is taken in int
            return f"{shape.tokens} tokens are past split_runtime's 32-bit token index"
        if p["kv_items"] * p["group"] > MAX_IN_FLIGHT:
            loads = p["kv_items"] * p["group"]
            return f"kv_items x group is {loads} replica loads in flight, over {MAX_IN_FLIGHT}"
        return super().reject(shape, dtype, p)

    def template_args(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> list[str]:
        args = super().template_args(shape, dtype, p)
        return [*args[:4], str(p["kv_items"]), *args[4:]]  # after GROUP

    def grid_terms(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> tuple[GridTerm, ...]:
        words = vector_words(shape, dtype, p["vec_bytes"])
        return (
            GridTerm(1, shape.NH * words, p["block"] * p["items"]),
            GridTerm(1, 2 * shape.NH_KV * words, p["block"] * p["kv_items"]),
        )


FAMILY = SplitRuntime()
