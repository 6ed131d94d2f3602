"""variants.flat: Inductor's kernel in CUDA. Its constraints, launch, index math (emulated in
NumPy against the reference) and its PTX: no runtime division at all, 128-bit accesses."""

from __future__ import annotations

import re

import numpy as np
import pytest
from kernel_ptx import kernel_ptx

from variants import DTYPES, FAMILIES, Config, InvalidConfig, Shape
from variants.family import ceil_div
from variants.flat import Flat
from variants.reference import reference

FLAT: Flat = FAMILIES["flat"]  # type: ignore[assignment]
SEED = Shape(8, 1024, 32, 8, 128)
FP32, BF16 = DTYPES["fp32"], DTYPES["bf16"]


def flat(
    block: int = 128, vec_bytes: int = 16, words: int = 1, load: str = "plain", store: str = "plain"
) -> Config:
    return Config.of("flat", block=block, vec_bytes=vec_bytes, words=words, load=load, store=store)


def test_rejections_give_reasons() -> None:
    assert "not divisible by the vector width" in FLAT.rejection(Shape(2, 3, 8, 2, 33), FP32, flat())
    # at most 2 words of 8 replicas (a group) of 16 bytes and their sums: 80 registers, no limit
    assert FLAT.rejection(Shape(1, 64, 64, 8, 128), BF16, flat(words=2)) is None
    assert FLAT.rejection(SEED, FP32, flat(vec_bytes=4, words=2)) is None
    with pytest.raises(InvalidConfig):  # 4 words a thread spilled (python -m tuner check)
        FLAT.rejection(SEED, FP32, flat(vec_bytes=4, words=4))


def test_launch_and_grid_terms_cover_every_word() -> None:
    odd = Shape(3, 7, 28, 4, 72)  # 21 tokens, 36 dinp heads of 9 words (bf16, 16 bytes)
    words = 21 * 36 * 9
    assert FLAT.geometry(odd, BF16, flat(block=64, words=2), 132).grid == ceil_div(words, 128)
    assert FLAT.grid_terms(odd, BF16, flat(block=64, words=2).values) == ((1, 36 * 9, 128),)


def test_the_head_layout_is_compiled_in() -> None:
    expression = FLAT.name_expression(SEED, BF16, flat(block=256, words=2))
    # T, VEC_BYTES, HDV, HEADS, NREP, BLOCK, WORDS, LOAD, STORE, I
    assert expression.endswith("<__nv_bfloat16, 16, 16, 48, 4, 256, 2, 0, 0, int>")
    huge = Shape(2, 65536, 64, 8, 128)
    assert "long long" in FLAT.name_expression(huge, BF16, flat())


def emulate(shape: Shape, dout: np.ndarray, hdv: int, block: int, words: int) -> np.ndarray:
    """flat.cu's index math in NumPy, over `dout` viewed as vector words (each `HD / hdv`
    elements), for every thread of the grid."""
    nh, nrep, heads = shape.NH, shape.nrep, shape.heads_in
    row = heads * hdv
    src = dout.reshape(shape.tokens * 3 * nh * hdv, -1)
    n = shape.tokens * row
    dst = np.full((n, src.shape[1]), np.nan)
    writes = np.zeros(n, dtype=int)
    grid = ceil_div(n, block * words)
    thread_first = (np.arange(grid)[:, None] * (block * words) + np.arange(block)[None, :]).ravel()
    for i in range(words):
        at = thread_first + i * block
        token = at // row
        within = at - token * row
        h = within // hdv
        head = np.where(h < nh, h, nh + (h - nh) * nrep)
        start = token * (3 * nh * hdv) + head * hdv + (within - h * hdv)
        live = at < n
        q, kv = live & (h < nh), live & (h >= nh)
        dst[at[q]] = src[start[q]]
        dst[at[kv]] = sum(src[start[kv] + r * hdv] for r in range(nrep))
        np.add.at(writes, at[live], 1)
    assert (writes == 1).all(), "every dinp word is written exactly once"
    return dst.ravel()


@pytest.mark.parametrize(
    ("shape", "hdv", "block", "words"),
    [
        (Shape(2, 3, 8, 2, 16), 4, 64, 1),  # a ragged last block
        (Shape(1, 5, 32, 8, 8), 2, 64, 2),  # words past the end in threads of the last block
        (Shape(3, 2, 6, 6, 8), 8, 64, 2),  # nrep 1
        (Shape(1, 3, 28, 4, 16), 16, 128, 2),  # nrep 7
        (Shape(1, 4, 36, 2, 8), 8, 64, 1),  # nrep 18: replicas in groups of 8
    ],
)
def test_index_math_reproduces_the_reference(shape: Shape, hdv: int, block: int, words: int) -> None:
    dout = np.random.default_rng(0).standard_normal(shape.dout_numel)
    got = emulate(shape, dout, hdv, block, words)
    np.testing.assert_allclose(got, reference(dout, shape).ravel(), rtol=1e-12)


def ptx(config: Config, dtype=BF16, shape: Shape = SEED) -> str:
    return kernel_ptx(config, dtype, shape)


@pytest.mark.parametrize("dtype", list(DTYPES.values()), ids=lambda d: d.name)
@pytest.mark.parametrize("words", [1, 2])
def test_no_runtime_division_and_128_bit_accesses(dtype, words: int) -> None:
    text = ptx(flat(words=words), dtype=dtype)
    assert re.findall(r"\b(?:div|rem)\.\w+", text) == []
    assert re.findall(r"\bld\.global\.v4", text) and re.findall(r"\bst\.global\.v4", text)
