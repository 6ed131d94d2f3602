"""Model presets (attention head layout), the default shape set and the default budget.

A model fixes NH, NH_KV and HD; a run adds the batch x sequence grid (B x T).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from variants import Shape
from variants.errors import RepkvTuneError


@dataclass(frozen=True)
class Model:
    name: str
    NH: int
    NH_KV: int
    HD: int

    def shape(self, B: int, T: int) -> Shape:
        return Shape(B=B, T=T, NH=self.NH, NH_KV=self.NH_KV, HD=self.HD)


MODELS: dict[str, Model] = {
    m.name: m
    for m in (
        Model("llama3-8b", 32, 8, 128),
        Model("llama3-70b", 64, 8, 128),
        Model("llama3-405b", 128, 8, 128),
        Model("llama3.2-1b", 32, 8, 64),
        Model("llama3.2-3b", 24, 8, 128),
        Model("mistral-7b", 32, 8, 128),
        Model("mixtral-8x7b", 32, 8, 128),
        Model("qwen2-7b", 28, 4, 128),
        Model("qwen2-72b", 64, 8, 128),
        Model("qwen2.5-0.5b", 14, 2, 64),
        Model("qwen2.5-7b", 28, 4, 128),
        Model("gemma2-2b", 8, 4, 256),
        Model("gemma2-9b", 16, 8, 256),
        Model("gemma2-27b", 32, 16, 128),
        # Multi-query attention (NH_KV = 1): every query head sums into one K/V head
        Model("falcon-7b", 71, 1, 64),
        Model("starcoder", 48, 1, 128),
        Model("gemma-2b", 8, 1, 256),
        Model("santacoder", 16, 1, 128),
        # Multi-head attention (nrep 1): the backward is a copy of dout's three parts
        Model("phi-3-mini", 32, 32, 96),
        Model("gemma-7b", 16, 16, 256),
        Model("llama2-7b", 32, 32, 128),
        Model("gpt2-124m", 12, 12, 64),  # what llm.c trains first
        # Odd and prime nrep, many heads
        Model("phi-3-medium", 40, 10, 128),  # nrep 4 over 10 K/V heads
        Model("qwen2.5-14b", 40, 8, 128),  # nrep 5
        Model("yi-34b", 56, 8, 128),  # nrep 7
        Model("mistral-large-2", 96, 8, 128),  # nrep 12
        Model("falcon-180b", 232, 8, 64),  # nrep 29
    )
}

# Distinct configurations measured per shape and dtype unless told otherwise.
DEFAULT_TRIALS = 40
DEFAULT_BATCH = (8,)
DEFAULT_SEQ = (1024,)

# The default set: the models above at a few B x T, each moving 30 MB .. 1.5 GB in bf16
# (small shapes where launch overhead shows, large ones where only bandwidth counts).
DEFAULT_SHAPES: tuple[Shape, ...] = (
    MODELS["llama3-8b"].shape(1, 1024),  # 38 MB
    MODELS["llama3-8b"].shape(8, 1024),  # 302 MB: llm.c's test shape
    MODELS["llama3-8b"].shape(16, 2048),  # 1.2 GB
    MODELS["llama3-70b"].shape(4, 2048),  # 570 MB
    MODELS["qwen2-7b"].shape(4, 2048),  # 252 MB
    MODELS["llama3.2-1b"].shape(8, 2048),  # 302 MB, HD=64
    MODELS["llama3.2-3b"].shape(4, 1024),  # 117 MB, nrep=3
    MODELS["qwen2.5-0.5b"].shape(8, 512),  # 31 MB, HD=64
    MODELS["qwen2.5-0.5b"].shape(16, 4096),  # 503 MB, nrep=7
    MODELS["gemma2-9b"].shape(4, 4096),  # 671 MB, HD=256
)


class UnknownModel(RepkvTuneError, ValueError):
    """A model name outside MODELS."""


def _squash(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def get_model(name: str) -> Model:
    """Look a model up by name, ignoring case and punctuation ('Llama-3 8B' -> llama3-8b)."""
    wanted = _squash(name)
    for model in MODELS.values():
        if _squash(model.name) == wanted:
            return model
    raise UnknownModel(f"unknown model {name!r}; expected one of {', '.join(MODELS)}")


def model_shapes(
    names: list[str], batches: tuple[int, ...] = DEFAULT_BATCH, seqs: tuple[int, ...] = DEFAULT_SEQ
) -> list[Shape]:
    """Every (model, B, T) of the grid, in the order given, without repeats."""
    shapes: list[Shape] = []
    for name in names:
        model = get_model(name)
        for B in batches:
            for T in seqs:
                shape = model.shape(B, T)
                if shape not in shapes:
                    shapes.append(shape)
    return shapes
