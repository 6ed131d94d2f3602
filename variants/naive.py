"""naive: llm.c's kernel1, one thread per dout element; the baseline of every result."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from variants.dtypes import DType
from variants.family import BLOCK_SIZES, INT32_MAX, Family, GridTerm, Launch, Param, ceil_div
from variants.shape import Shape


class Naive(Family):
    name = "naive"
    layout_free = True
    doc = "llm.c kernel1: one thread per dout element, idle K/V replicas, int indices"
    params = (Param("block", BLOCK_SIZES, "threads per block"),)

    def reject(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> str | None:
        # llm.c indexes with int: the flat thread index must not overflow.
        if ceil_div(shape.dout_numel, p["block"]) * p["block"] > INT32_MAX:
            return f"dout has {shape.dout_numel} elements; llm.c's int indices stop at 2^31"
        return None

    def template_args(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> list[str]:
        return [dtype.ctype]

    def launch(self, shape: Shape, dtype: DType, p: Mapping[str, Any], sm_count: int) -> Launch:
        return Launch(ceil_div(shape.dout_numel, p["block"]), p["block"])

    def grid_terms(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> tuple[GridTerm, ...]:
        return (GridTerm(1, 3 * shape.NH * shape.HD, p["block"]),)


FAMILY = Naive()
BASELINE_PARAMS = {"block": 128}  # llm.c's hard-coded block size
