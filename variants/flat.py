"""flat: Inductor's kernel in CUDA: a 1-D grid over dinp's words with the head layout compiled
in, so a word's (token, head, offset) costs multiplies, not divisions; `vec`'s layout without
its runtime index math. The layout families of the chain's ops (`variants.layout_family`) grew
from it; it keeps the space its stored rows were tuned over."""

from __future__ import annotations

from variants.family import Param
from variants.layout_family import LAYOUT_PARAMS, LayoutFamily

WORDS = Param("words", (1, 2), "dinp words per thread, BLOCK apart (their loads in flight together)")


class Flat(LayoutFamily):
    name = "flat"
    doc = "one thread per WORDS words of dinp, as Inductor's kernel; the head layout compiled in"
    params = tuple(WORDS if p.name == WORDS.name else p for p in LAYOUT_PARAMS)
    int_tokens = False  # flat.cu never takes a token's position: any token count it can index


FAMILY = Flat()
