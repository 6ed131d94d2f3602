"""GPU conformance: every family x dtype x a sample of its configurations (every block size
at least once) on shapes that reach every code path, each launch validated element by
element against the float64 reference (fresh random input, output poisoned with NaN)."""

from __future__ import annotations

import random

import pytest

from variants import BASELINE, DTYPES, FAMILIES, Config, DType, Shape

pytestmark = pytest.mark.gpu

SHAPES = {
    "seed": Shape(8, 1024, 32, 8, 128),
    "nrep1": Shape(4, 256, 32, 32, 64),
    "nhkv1": Shape(2, 128, 16, 1, 128),
    "hd80": Shape(2, 96, 32, 8, 80),
    "hd96_nrep7": Shape(3, 50, 28, 4, 96),
    "hd256": Shape(2, 64, 16, 8, 256),
    "t1": Shape(1, 1, 32, 8, 128),
    "odd_bt": Shape(3, 333, 8, 2, 64),
    "hd33": Shape(5, 3, 12, 3, 33),
    "hd1": Shape(1, 2, 6, 1, 1),
    "llama70b": Shape(1, 17, 64, 8, 128),
    "qwen05b": Shape(2, 11, 14, 2, 64),
    "nrep16_hd8": Shape(3, 5, 32, 2, 8),
}
# More than 2^31 dout elements in bf16 (6.4 GB): 64-bit indices; naive is excluded there.
HUGE = Shape(2, 65536, 64, 8, 128)


def block_param(family) -> str:
    return next(p.name for p in family.params if p.name in ("block", "warps"))


def sample(shape: Shape, dtype: DType, seed: int = 0) -> list[Config]:
    """For every family: one random valid configuration per block size, plus llm.c's baseline."""
    rng = random.Random(f"{shape}-{dtype.name}-{seed}")
    picked = []
    for family in FAMILIES.values():
        valid = family.valid_configs(shape, dtype)
        key = block_param(family)
        for value in sorted({c.values[key] for c in valid}):
            picked.append(rng.choice([c for c in valid if c.values[key] == value]))
    if BASELINE not in picked and FAMILIES["naive"].valid_configs(shape, dtype):
        picked.append(BASELINE)
    return picked


CASES = [
    pytest.param(shape, DTYPES[dtype], config, id=f"{name}-{dtype}-{config.key}")
    for name, shape in SHAPES.items()
    for dtype in DTYPES
    for config in sample(shape, DTYPES[dtype])
]


@pytest.fixture(scope="module")
def session():
    from tuner.runners.gpu.session import DeviceSession

    s = DeviceSession(reps=5)
    work = [
        (FAMILIES[c.family], FAMILIES[c.family].name_expression(shape, dtype, c))
        for shape, dtype, c in (p.values for p in CASES)
    ]
    s.kernels.prepare(work, threads=16)
    yield s
    s.release()


@pytest.mark.parametrize(("shape", "dtype", "config"), CASES)
def test_configuration_is_correct(session, shape: Shape, dtype: DType, config: Config) -> None:
    result = session.run_checked(shape, dtype, session.launcher(shape, dtype, config))
    assert result.ok, result.summary()


def test_every_family_and_block_size_is_covered() -> None:
    covered = {(c.family, c.values[block_param(FAMILIES[c.family])]) for _, _, c in (p.values for p in CASES)}
    for family in FAMILIES.values():
        for value in next(p.choices for p in family.params if p.name == block_param(family)):
            assert (family.name, value) in covered


HUGE_CONFIGS = [
    Config.of("gather", block=256, load="ldcs", store="plain"),
    Config.of("vec", block=512, vec_bytes=16, load="plain", store="stcs"),
    Config.of("warp_per_head", warps=8, vec_bytes=16, load="ldg", store="plain"),
    Config.of("split", block=256, vec_bytes=16, items=4, load="ldcs", store="plain"),
    Config.of(
        "split_runtime", block=256, vec_bytes=16, items=4, group=4, kv_items=2, load="ldg", store="plain"
    ),
    Config.of(
        "tile",
        block=128,
        vec_bytes=16,
        tokens=4,
        order="head_fastest",
        heads="compiled",
        load="ldcs",
        store="stcs",
    ),
    Config.of("bulk", block=128, groups=2, stages=3, blocks_per_sm=2, l2="evict_first"),
    Config.of("flat", block=256, vec_bytes=16, words=2, load="ldcs", store="stcs"),
    Config.of("warp_sum", block=256, vec_bytes=16, items=4, load="ldcs", store="plain", tail=4),
    Config.of("warp_sum_runtime", block=256, vec_bytes=16, items=4, load="ldcs", store="plain", tail=2),
]


@pytest.mark.parametrize("config", HUGE_CONFIGS, ids=lambda c: c.key)
def test_more_than_2_31_elements_in_bf16(session, config: Config) -> None:
    bf16 = DTYPES["bf16"]
    assert HUGE.dout_numel > 2**31
    if config.family != "bulk":  # bulk's index math is 64-bit throughout
        assert "long long" in FAMILIES[config.family].name_expression(HUGE, bf16, config)
    result = session.run_checked(HUGE, bf16, session.launcher(HUGE, bf16, config))
    assert result.ok, result.summary()


SAMPLED_CASES = [
    pytest.param(shape, DTYPES[dtype], config, id=f"{name}-{dtype}-{config.key}")
    for family in ("bulk", "tile", "flat", "split_runtime", "warp_sum", "warp_sum_runtime")
    for name, shape in SHAPES.items()
    for dtype in DTYPES
    for config in random.Random(f"{family}-{name}-{dtype}").sample(
        FAMILIES[family].valid_configs(shape, DTYPES[dtype]),
        k=min(8, len(FAMILIES[family].valid_configs(shape, DTYPES[dtype]))),
    )
]


@pytest.mark.parametrize(("shape", "dtype", "config"), SAMPLED_CASES)
def test_sampled_configurations_of_the_many_parameter_families(
    session, shape: Shape, dtype: DType, config: Config
) -> None:
    """The block size alone (the sample above) leaves most of bulk's pipeline (stages,
    persistence, L2 policy), of tile's (tokens per tile, ragged last tiles, replica groups) and
    of flat's (words per thread, replica groups), of split_runtime's and warp_sum's (items a thread)
    untried: 8 random configurations of each shape and dtype each family serves."""
    result = session.run_checked(shape, dtype, session.launcher(shape, dtype, config))
    assert result.ok, result.summary()


@pytest.mark.parametrize("family", ["warp_sum", "warp_sum_runtime"])
@pytest.mark.parametrize("tail", [1, 2, 4])
@pytest.mark.parametrize(
    "shape", [SHAPES["nhkv1"], Shape(1, 3, 5, 1, 64), Shape(3, 7, 71, 1, 64)], ids=lambda s: s.key
)
def test_warp_sum_with_its_copy_blocks_last(session, shape: Shape, tail: int, family: str) -> None:
    """`tail` reorders the blocks: every copy and reduce block still runs once, down to a few
    copy blocks where TAIL/8 of them rounds to none (the layout compiled in or read at run time)."""
    for dtype in DTYPES.values():
        configs = [c for c in FAMILIES[family].valid_configs(shape, dtype) if c.values["tail"] == tail]
        for config in random.Random(f"{shape}-{dtype.name}-{tail}").sample(configs, k=min(4, len(configs))):
            result = session.run_checked(shape, dtype, session.launcher(shape, dtype, config))
            assert result.ok, f"{config.key} {dtype.name}: {result.summary()}"


def test_gpu_reference_matches_numpy() -> None:
    import cupy as cp
    import numpy as np

    from variants.reference import decode, random_input, reference

    for shape in (SHAPES["hd96_nrep7"], SHAPES["nhkv1"]):
        for dtype in DTYPES.values():
            dout = random_input(shape, dtype, cp, seed=3)
            on_gpu = reference(decode(dout, dtype, cp), shape, cp).get()
            on_cpu = reference(decode(dout.get(), dtype), shape)
            np.testing.assert_allclose(on_gpu, on_cpu, rtol=1e-13, atol=1e-13)


def test_validator_catches_a_launch_that_writes_nothing(session) -> None:
    shape, dtype = SHAPES["odd_bt"], DTYPES["bf16"]
    result = session.run_checked(shape, dtype, lambda: None)
    assert result.bad == shape.dinp_numel
