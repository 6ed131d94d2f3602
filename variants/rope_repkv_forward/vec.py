"""vec: one thread per 4/8/16-byte word of out, a vectorized gather that rotates q and k words
(each K word is read and rotated nrep times, once per replica)."""

from __future__ import annotations

from pathlib import Path

from variants.rope_repkv_forward.rope import RopeVec
from variants.shape import Shape


class Vec(RopeVec):
    doc = "one thread per vector word of out: gather, rotate q/k in float, store"
    kernel_prefix = "rope_repkv_forward"
    template_dir = Path(__file__).resolve().parent

    def token_heads(self, shape: Shape) -> int:
        return 3 * shape.NH


FAMILY = Vec()
