"""flat: replicate with the head layout compiled in and 1, 2 or 4 words of inp a thread: each
word loaded once and stored to its nrep replicas, no runtime division."""

from __future__ import annotations

from pathlib import Path

from variants.layout_family import LayoutFamily


class Flat(LayoutFamily):
    doc = "WORDS words of inp a thread, the head layout compiled in: one load, nrep stores for K/V"
    kernel_prefix = "repkv_forward"
    template_dir = Path(__file__).resolve().parent


FAMILY = Flat()
