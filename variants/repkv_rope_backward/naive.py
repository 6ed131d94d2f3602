"""naive: llm.c's rope_backward_inplace then repkv_backward, per element in one kernel: one thread
per dinp element, each K replica rotated back in float before the float sum (llm.c's order, without
its bf16 rounding in between), int indices, block 128 as llm.c (the baseline)."""

from __future__ import annotations

from pathlib import Path

from variants.rope_repkv_forward.rope import RopeNaive


class Naive(RopeNaive):
    doc = "llm.c's rope_backward + repkv_backward per element: one thread per dinp element, int indices"
    kernel_prefix = "repkv_rope_backward"
    template_dir = Path(__file__).resolve().parent


FAMILY = Naive()
BASELINE_PARAMS = {"block": 128}  # llm.c's hard-coded block size (rope and repkv backward)
