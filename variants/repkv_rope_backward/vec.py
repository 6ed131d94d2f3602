"""vec: one thread per 4/8/16-byte word of dinp: the nrep replica words summed in float, then
q and the summed k rotated back once, rounded once."""

from __future__ import annotations

from pathlib import Path

from variants.rope_repkv_forward.rope import RopeVec


class Vec(RopeVec):
    doc = "one thread per vector word of dinp: sum the replicas in float, rotate q/k once, store"
    kernel_prefix = "repkv_rope_backward"
    template_dir = Path(__file__).resolve().parent


FAMILY = Vec()
