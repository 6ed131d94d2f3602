"""naive: llm.c's repkv_forward then rope_forward, per element in one kernel: one thread per out
element, int indices, block 128 as llm.c (the baseline)."""

from __future__ import annotations

from pathlib import Path

from variants.rope_repkv_forward.rope import RopeNaive
from variants.shape import Shape


class Naive(RopeNaive):
    doc = "llm.c's repkv_forward + rope_forward per element: one thread per out element, int indices"
    kernel_prefix = "rope_repkv_forward"
    template_dir = Path(__file__).resolve().parent

    def token_heads(self, shape: Shape) -> int:
        return 3 * shape.NH


FAMILY = Naive()
BASELINE_PARAMS = {"block": 128}  # llm.c's hard-coded block size (repkv_forward and rope_forward)
