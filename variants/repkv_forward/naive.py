"""naive: llm.c's repkv_forward_kernel1, one thread per out element; the baseline."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from variants.dtypes import DType
from variants.family import BLOCK_SIZES, Family, GridTerm, Launch, Param, ceil_div
from variants.repkv_forward.layout import out_numel, out_token_elements
from variants.shape import INT32_MAX, Shape


class Naive(Family):
    name = "naive"
    layout_free = True
    doc = "llm.c kernel1: one thread per out element, one __ldcs each, int indices"
    params = (Param("block", BLOCK_SIZES, "threads per block"),)
    kernel_prefix = "repkv_forward"
    template_dir = Path(__file__).resolve().parent

    def reject(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> str | None:
        # llm.c indexes with int: the flat thread index must not overflow.
        if ceil_div(out_numel(shape), p["block"]) * p["block"] > INT32_MAX:
            return f"out has {out_numel(shape)} elements; llm.c's int indices stop at 2^31"
        return None

    def template_args(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> list[str]:
        return [dtype.ctype]

    def launch(self, shape: Shape, dtype: DType, p: Mapping[str, Any], sm_count: int) -> Launch:
        return Launch(ceil_div(out_numel(shape), p["block"]), p["block"])

    def grid_terms(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> tuple[GridTerm, ...]:
        return (GridTerm(1, out_token_elements(shape), p["block"]),)


FAMILY = Naive()
BASELINE_PARAMS = {"block": 128}  # llm.c's hard-coded block size
