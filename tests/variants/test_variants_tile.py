"""variants.tile: Triton's layout in CUDA. Its constraints, launch, index math (emulated in NumPy
against the reference) and its PTX: one runtime division per block, none per element."""

from __future__ import annotations

import re

import numpy as np
import pytest
from kernel_ptx import kernel_ptx

from variants import DTYPES, FAMILIES, Config, Shape
from variants.family import ceil_div
from variants.reference import reference
from variants.tile import MAX_LIVE_REGISTERS, Tile

TILE: Tile = FAMILIES["tile"]  # type: ignore[assignment]
SEED = Shape(8, 1024, 32, 8, 128)
FP32, BF16 = DTYPES["fp32"], DTYPES["bf16"]


def tile(
    block: int = 128,
    vec_bytes: int = 16,
    tokens: int = 4,
    order: str = "tile_fastest",
    heads: str = "runtime",
    load: str = "plain",
    store: str = "plain",
) -> Config:
    return Config.of(
        "tile",
        block=block,
        vec_bytes=vec_bytes,
        tokens=tokens,
        order=order,
        heads=heads,
        load=load,
        store=store,
    )


def test_rejections_give_reasons() -> None:
    assert "not divisible by the vector width" in TILE.rejection(Shape(2, 3, 8, 2, 33), FP32, tile())
    # HD 64 in bf16 is 8 words of 16 bytes: one token is 8 words for 256 threads
    assert "would idle" in TILE.rejection(Shape(1, 64, 8, 2, 64), BF16, tile(block=256, tokens=1))
    # HD 256 in fp32 with 8-byte words is 128 words a token: 32 tokens are 64 words a thread
    assert "over 8 per thread" in TILE.rejection(SEED, FP32, tile(block=64, vec_bytes=8, tokens=32))
    # nrep 8: 4 words x (8 replicas x 4 registers + 8 bf16 sums) = 160 registers
    registers = TILE.rejection(Shape(1, 64, 64, 8, 128), BF16, tile(block=64, tokens=16))
    assert registers and f"over {MAX_LIVE_REGISTERS}" in registers
    assert TILE.rejection(SEED, BF16, tile()) is None


def test_grid_is_a_block_per_head_and_tile_of_tokens() -> None:
    odd = Shape(3, 7, 28, 4, 256)  # 21 tokens, 36 dinp heads
    assert TILE.geometry(odd, BF16, tile(tokens=4), 132).grid == 36 * ceil_div(21, 4)
    assert TILE.geometry(odd, BF16, tile(block=64, tokens=1), 132).block == 64
    # the header's launch data: heads_in * ceil(B*T / tokens), for any B*T of the layout
    assert TILE.grid_terms(odd, BF16, tile(tokens=4).values) == ((36, 1, 4),)
    longer = Shape(5, 999, 28, 4, 256)
    assert sum(t.blocks(longer.tokens) for t in TILE.grid_terms(longer, BF16, tile(tokens=4).values)) == (
        TILE.geometry(longer, BF16, tile(tokens=4), 132).grid
    )


def emulate(
    shape: Shape, dout: np.ndarray, words_per_head: int, bt: int, block: int, head_fastest: bool
) -> np.ndarray:
    """The kernel's index math in NumPy, block by block and word by word (see tile.cu), over
    `dout` viewed as vector words (each `HD / words_per_head` elements)."""
    nh, nh_kv, nrep, hdv = shape.NH, shape.NH_KV, shape.nrep, words_per_head
    heads_in, tokens = shape.heads_in, shape.tokens
    src = dout.reshape(tokens * 3 * nh * hdv, -1)
    dst = np.full((tokens * heads_in * hdv, src.shape[1]), np.nan)
    writes = np.zeros(len(dst), dtype=int)
    words = bt * hdv
    tiles = ceil_div(tokens, bt)
    w = np.arange(block)[:, None] + np.arange(ceil_div(words, block))[None, :] * block
    for blk in range(heads_in * tiles):
        if head_fastest:
            tile_index = blk // heads_in
            head = blk - tile_index * heads_in
        else:
            head = blk // tiles
            tile_index = blk - head * tiles
        t = tile_index * bt + w // hdv
        d = w % hdv
        live = (w < words) & (t < tokens)
        t, d = t[live], d[live]
        to = (t * heads_in + head) * hdv + d
        if head < nh:
            dst[to] = src[(t * 3 * nh + head) * hdv + d]
        else:
            kv = head - nh
            which = int(kv >= nh_kv)
            first = (1 + which) * nh + (kv - which * nh_kv) * nrep
            dst[to] = sum(src[(t * 3 * nh + first + r) * hdv + d] for r in range(nrep))
        np.add.at(writes, to, 1)
    assert (writes == 1).all(), "every dinp word is written exactly once"
    return dst.ravel()


@pytest.mark.parametrize(
    ("shape", "words_per_head", "bt", "block"),
    [
        (Shape(2, 3, 8, 2, 16), 4, 4, 64),  # 6 tokens in tiles of 4: a ragged last tile
        (Shape(1, 5, 32, 8, 8), 2, 32, 64),  # one tile taller than the tokens
        (Shape(3, 2, 6, 6, 8), 8, 1, 64),  # nrep 1, half the threads idle
        (Shape(1, 3, 28, 4, 16), 16, 2, 64),  # nrep 7
        (Shape(1, 4, 36, 2, 8), 8, 16, 128),  # nrep 18: replicas in groups of 8
    ],
)
@pytest.mark.parametrize("head_fastest", [False, True], ids=["tile_fastest", "head_fastest"])
def test_index_math_reproduces_the_reference(
    shape: Shape, words_per_head: int, bt: int, block: int, head_fastest: bool
) -> None:
    dout = np.random.default_rng(0).standard_normal(shape.dout_numel)
    got = emulate(shape, dout, words_per_head, bt, block, head_fastest)
    np.testing.assert_allclose(got, reference(dout, shape).ravel(), rtol=1e-12)


def ptx(config: Config, dtype=BF16, shape: Shape = SEED) -> str:
    return kernel_ptx(config, dtype, shape)


def divisions(text: str) -> list[str]:
    return re.findall(r"\b(?:div|rem)\.\w+", text)


@pytest.mark.parametrize("order", ["tile_fastest", "head_fastest"])
@pytest.mark.parametrize("dtype", list(DTYPES.values()), ids=lambda d: d.name)
def test_the_block_index_is_the_only_runtime_division(dtype, order: str) -> None:
    text = ptx(tile(tokens=8, order=order), dtype=dtype)
    assert len(divisions(text)) == 1, divisions(text)
    assert re.search(r"\bdiv\.u32\b", text)
    assert re.findall(r"\bld\.global\.v4", text) and re.findall(r"\bst\.global\.v4", text)


@pytest.mark.parametrize("dtype", list(DTYPES.values()), ids=lambda d: d.name)
def test_compiled_heads_leave_no_division_in_head_fastest_order(dtype) -> None:
    assert divisions(ptx(tile(tokens=8, order="head_fastest", heads="compiled"), dtype=dtype)) == []
    # tile_fastest divides by the count of tiles, which B*T sets at run time
    assert len(divisions(ptx(tile(tokens=8, order="tile_fastest", heads="compiled"), dtype=dtype))) == 1


def test_compiled_heads_recover_the_layout_from_the_total_and_nrep() -> None:
    # tile.cu: NH_KV = HEADS_C / (NREP + 2), NH = NH_KV * NREP
    for nh_kv in range(1, 65):
        for nrep in range(1, 33):
            shape = Shape(1, 1, nh_kv * nrep, nh_kv, 8)
            assert shape.heads_in // (nrep + 2) == nh_kv and nh_kv * nrep == shape.NH
    expression = TILE.name_expression(SEED, BF16, tile(heads="compiled"))
    assert f", {SEED.heads_in}, int>" in expression
    assert ", 0, int>" in TILE.name_expression(SEED, BF16, tile())


def test_rows_stored_before_order_existed_read_as_tile_fastest() -> None:
    from results.index import parse_config

    before = '{"block": 64, "load": "ldg", "store": "stcs", "tokens": 8, "vec_bytes": 16}'
    family, config, params = parse_config("tile", before)
    assert params["order"] == "tile_fastest" and params["heads"] == "runtime"
    assert config == tile(block=64, tokens=8, load="ldg", store="stcs")
    assert family.completed({"order": "head_fastest"})["order"] == "head_fastest"  # never overridden
    assert FAMILIES["split"].completed({"block": 64}) == {"block": 64}  # no parameter added since
