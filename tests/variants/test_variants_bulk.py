"""variants.bulk: the Hopper bulk-copy family's constraints, launch, tile index math (emulated in
NumPy against the reference) and its offline compilation for sm_90 and older GPUs."""

from __future__ import annotations

import re

import numpy as np
import pytest

from variants import DTYPES, FAMILIES, Config, Shape, families_for, runs_on
from variants.bulk import STATIC_SHARED_LIMIT, Bulk
from variants.reference import reference

BULK: Bulk = FAMILIES["bulk"]  # type: ignore[assignment]
SEED = Shape(8, 1024, 32, 8, 128)
FP32, BF16 = DTYPES["fp32"], DTYPES["bf16"]


def bulk(
    block: int = 128, groups: int = 2, stages: int = 3, blocks_per_sm: int = 2, l2: str = "none"
) -> Config:
    return Config.of("bulk", block=block, groups=groups, stages=stages, blocks_per_sm=blocks_per_sm, l2=l2)


def test_rejections_give_reasons() -> None:
    assert "not whole 16-byte words" in BULK.rejection(Shape(2, 3, 8, 2, 33), FP32, bulk())
    assert "NH_KV=2 is not divisible by groups=4" in BULK.rejection(
        Shape(2, 3, 8, 2, 64), FP32, bulk(groups=4)
    )
    # 4 stages of 8 groups x 4 replicas x 512-byte heads = 64 KB
    too_big = BULK.rejection(SEED, FP32, bulk(groups=8, stages=4))
    assert too_big and f"exceed the {STATIC_SHARED_LIMIT}" in too_big
    # 8 blocks of 3 x 4 x 4 x 512 + 3 x 4 x 512 + 24 bytes (30.7 KB) exceed an SM's 228 KB
    assert "do not fit one SM" in BULK.rejection(SEED, FP32, bulk(groups=4, stages=3, blocks_per_sm=8))
    assert BULK.rejection(SEED, BF16, bulk(groups=8, stages=2, blocks_per_sm=2)) is None


def test_shared_memory_of_a_configuration() -> None:
    # 3 stages x (2 groups x 4 replicas) heads + 3 output buffers of 2 heads, 256 bytes a head
    assert Bulk.shared_bytes(SEED, BF16, bulk(groups=2, stages=3).values) == 3 * 8 * 256 + 3 * 2 * 256 + 24


def test_persistent_grid_is_the_sm_count_times_blocks_per_sm_at_most_the_tiles() -> None:
    tiles = SEED.tokens * 3 * (SEED.NH_KV // 2)
    assert BULK.geometry(SEED, BF16, bulk(blocks_per_sm=0), 132).grid == tiles
    assert BULK.geometry(SEED, BF16, bulk(blocks_per_sm=2), 132).grid == 264
    tiny = Shape(1, 1, 32, 8, 128)
    assert BULK.geometry(tiny, BF16, bulk(blocks_per_sm=4), 132).grid == 3 * 4
    assert BULK.geometry(tiny, BF16, bulk(block=512), 132).block == 512
    assert BULK.grid_terms(SEED, BF16, bulk().values) is None  # the grid depends on the GPU


def emulate(shape: Shape, dout: np.ndarray, groups: int, stages: int, grid: int) -> np.ndarray:
    """The kernel's tile loop in NumPy, index for index (see bulk.cu): every block's tiles, the
    stage each lands in, where each is read and written."""
    hd, nrep, nh, nh_kv = shape.HD, shape.nrep, shape.NH, shape.NH_KV
    c_per_seg, heads_in = nh_kv // groups, nh + 2 * nh_kv
    tiles = shape.tokens * 3 * c_per_seg
    tile = groups * nrep * hd
    dinp = np.full(shape.dinp_numel, np.nan)
    ring = np.zeros((stages, tile))
    for block in range(grid):
        mine = list(range(block, tiles, grid))
        for k, u in enumerate(mine):
            start = (u // c_per_seg * nh + (u % c_per_seg) * groups * nrep) * hd
            ring[k % stages] = dout[start : start + tile]
            row = u // c_per_seg
            token, seg, c = row // 3, row % 3, u - row * c_per_seg
            if seg == 0:
                at = (token * heads_in + c * groups * nrep) * hd
                dinp[at : at + tile] = ring[k % stages]
            else:
                summed = ring[k % stages].reshape(groups, nrep, hd).sum(axis=1).ravel()
                at = (token * heads_in + nh + (seg - 1) * nh_kv + c * groups) * hd
                dinp[at : at + groups * hd] = summed
    return dinp


@pytest.mark.parametrize(
    ("shape", "groups", "grid"),
    [
        (Shape(2, 3, 8, 2, 16), 1, 5),
        (Shape(2, 3, 8, 2, 16), 2, 1),
        (Shape(1, 5, 32, 8, 8), 4, 7),
        (Shape(3, 2, 6, 6, 8), 2, 100),  # nrep 1, more blocks than tiles
        (Shape(1, 3, 28, 4, 16), 2, 3),  # nrep 7
    ],
)
def test_tile_index_math_reproduces_the_reference(shape: Shape, groups: int, grid: int) -> None:
    dout = np.random.default_rng(0).standard_normal(shape.dout_numel)
    got = emulate(shape, dout, groups, stages=3, grid=grid)
    np.testing.assert_allclose(got, reference(dout, shape).ravel(), rtol=1e-12)


def test_families_for_a_compute_capability() -> None:
    assert "bulk" in families_for("9.0") and "bulk" in families_for(None)
    assert "bulk" not in families_for("8.0") and "split" in families_for(80)
    assert not runs_on(bulk(), "8.6") and runs_on(bulk(), "9.0") and runs_on(bulk(), "")
    assert runs_on(Config.of("naive", block=128), "7.0")


nvrtc = pytest.importorskip("variants.nvrtc")


def ptx(config: Config, arch: str = "sm_90", dtype=BF16) -> str:
    try:
        nvrtc.nvrtc_version()
    except nvrtc.NvrtcUnavailable as exc:  # pragma: no cover - CI installs the nvrtc extra
        pytest.skip(str(exc))
    expression = BULK.name_expression(SEED, dtype, config)
    (report,) = nvrtc.compile_expressions(BULK, [expression], arch=arch, keep_ptx=True)
    assert report.ok and report.ptx, report.error
    assert not report.spills
    return report.ptx


@pytest.mark.parametrize("dtype", list(DTYPES.values()), ids=lambda d: d.name)
def test_threads_move_no_global_memory_the_bulk_engine_does(dtype) -> None:
    text = ptx(bulk(), dtype=dtype)
    assert re.search(r"cp\.async\.bulk\.shared::cluster\.global\.mbarrier::complete_tx::bytes ", text)
    assert "cp.async.bulk.global.shared::cta.bulk_group" in text
    assert "mbarrier.try_wait.parity" in text
    assert not re.findall(r"\b(?:ld|st)\.global", text)
    assert "createpolicy" not in text


def test_evict_first_loads_carry_an_l2_policy() -> None:
    text = ptx(bulk(l2="evict_first"))
    assert "createpolicy.fractional.L2::evict_first" in text
    assert "complete_tx::bytes.L2::cache_hint" in text


def test_older_gpus_get_a_kernel_that_traps() -> None:
    text = ptx(bulk(), arch="sm_80")
    assert "trap;" in text and "cp.async.bulk" not in text
