"""replicate: one thread per 4/8/16-byte word of inp: each q/k word is loaded and rotated once,
then stored once (q) or to its nrep replicas (k, v)."""

from __future__ import annotations

from pathlib import Path

from variants.rope_repkv_forward.rope import RopeVec


class Replicate(RopeVec):
    name = "replicate"
    doc = "one thread per vector word of inp: one load, one rotation, nrep stores for K/V"
    kernel_prefix = "rope_repkv_forward"
    template_dir = Path(__file__).resolve().parent


FAMILY = Replicate()
