from __future__ import annotations

import itertools

import pytest

from variants import BASELINE, DTYPES, FAMILIES, Config, InvalidConfig, Shape, get_family, valid_configs
from variants.family import BLOCK_SIZES, INT32_MAX

SEED = Shape(8, 1024, 32, 8, 128)
HUGE = Shape(2, 65536, 64, 8, 128)  # dout has 3.2e9 elements


def test_registry_has_the_required_families() -> None:
    assert {"naive", "gather", "vec", "warp_per_head", "split"} <= set(FAMILIES)
    assert Config.of("naive", block=128) == BASELINE


def test_every_family_covers_block_sizes_32_to_1024() -> None:
    sizes = set()
    for family in FAMILIES.values():
        for config in family.valid_configs(SEED, DTYPES["bf16"]):
            sizes.add(family.geometry(SEED, DTYPES["bf16"], config, 132).block)
    assert sizes == set(BLOCK_SIZES)


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_space_counts_for_the_seed_shape(dtype: str) -> None:
    counts = {name: len(f.valid_configs(SEED, DTYPES[dtype])) for name, f in FAMILIES.items()}
    assert counts["naive"] == 6
    assert counts["gather"] == 6 * 3 * 2
    # 4-byte words are narrower than nothing, so every vector width serves every dtype here
    assert counts["vec"] == 6 * 3 * 3 * 2
    assert counts["warp_per_head"] == 6 * 3 * 3 * 2
    assert counts["split"] == 5 * 2 * 4 * 3 * 2
    assert len(valid_configs(SEED, DTYPES[dtype])) == sum(counts.values())


def test_vector_constraints_give_reasons() -> None:
    odd = Shape(2, 3, 8, 2, 33)
    vec = get_family("vec")
    reason = vec.rejection(
        odd, DTYPES["bf16"], Config.of("vec", block=128, vec_bytes=16, load="plain", store="plain")
    )
    assert reason and "HD=33 is not divisible by the vector width 8" in reason
    # scalar-wide words still serve fp32 at any HD
    assert (
        vec.rejection(
            odd, DTYPES["fp32"], Config.of("vec", block=128, vec_bytes=4, load="plain", store="plain")
        )
        is None
    )
    narrow = vec.rejection(
        SEED, DTYPES["fp32"], Config.of("vec", block=128, vec_bytes=4, load="plain", store="plain")
    )
    assert narrow is None


def test_naive_is_excluded_past_int32_and_others_use_64_bit_indices() -> None:
    bf16 = DTYPES["bf16"]
    assert HUGE.dout_numel > INT32_MAX
    assert FAMILIES["naive"].valid_configs(HUGE, bf16) == []
    reason = FAMILIES["naive"].rejection(HUGE, bf16, BASELINE)
    assert "2^31" in reason
    for name in ("gather", "vec", "warp_per_head", "split"):
        family = FAMILIES[name]
        config = family.valid_configs(HUGE, bf16)[0]
        assert family.name_expression(HUGE, bf16, config).endswith("long long>")
        assert family.name_expression(SEED, bf16, config).endswith("int>")


@pytest.mark.parametrize(
    "config",
    [
        Config.of("vec", block=100, vec_bytes=16, load="plain", store="plain"),
        Config.of("vec", block=128, vec_bytes=16, load="plain"),
        Config.of("vec", block=128, vec_bytes=16, load="plain", store="plain", extra=1),
        Config.of("naive", block=128, vec_bytes=4),
    ],
)
def test_configs_outside_the_space_are_refused_before_compiling(config: Config) -> None:
    with pytest.raises(InvalidConfig):
        FAMILIES[config.family].name_expression(SEED, DTYPES["fp32"], config)


def test_unknown_family_is_named() -> None:
    with pytest.raises(ValueError, match="unknown kernel family 'nope'"):
        get_family("nope")


SHAPES = [
    SEED,
    Shape(1, 1, 32, 8, 128),
    Shape(3, 333, 8, 2, 64),
    Shape(2, 7, 16, 1, 80),
    Shape(5, 3, 12, 3, 33),
]


@pytest.mark.parametrize(("shape", "dtype"), list(itertools.product(SHAPES, DTYPES.values())), ids=str)
def test_launch_geometry_covers_every_output(shape: Shape, dtype) -> None:
    """Threads launched x outputs per thread reach every dinp element, and grids stay legal."""
    for family in FAMILIES.values():
        for config in family.valid_configs(shape, dtype):
            p = config.values
            launch = family.geometry(shape, dtype, config, 132)
            assert 1 <= launch.block <= 1024 and launch.block % 32 == 0
            assert 1 <= launch.grid < 2**31
            threads = launch.grid * launch.block
            if family.name == "naive":
                assert threads >= shape.dout_numel
            elif family.name == "gather":
                assert threads >= shape.dinp_numel
            elif family.name == "vec":
                assert threads * p["vec_bytes"] >= shape.dinp_numel * dtype.itemsize
            elif family.name == "warp_per_head":
                assert threads // 32 >= shape.tokens * shape.heads_in
            elif family.name == "split":
                q_blocks, kv_blocks = family.blocks(shape, dtype, p)
                assert q_blocks + kv_blocks == launch.grid


def test_name_expression_is_the_identity_of_a_kernel() -> None:
    bf16 = DTYPES["bf16"]
    split = FAMILIES["split"]
    config = Config.of("split", block=256, vec_bytes=16, items=4, load="ldcs", store="plain")
    assert (
        split.name_expression(SEED, bf16, config)
        == "repkv_split<__nv_bfloat16, 16, 16, 4, 4, 256, 2, 0, int>"
    )
    assert FAMILIES["naive"].name_expression(SEED, DTYPES["fp16"], BASELINE) == "repkv_naive<__half>"
    # one hash a template: warp_sum_runtime instantiates warp_sum's
    templates = {f.template_path for f in FAMILIES.values()}
    assert len({f.source_hash for f in FAMILIES.values()}) == len(templates)
    assert FAMILIES["warp_sum_runtime"].source_hash == FAMILIES["warp_sum"].source_hash


def test_neighbours_differ_in_one_parameter_and_serve_the_shape() -> None:
    vec, bf16 = get_family("vec"), DTYPES["bf16"]
    config = Config.of("vec", block=256, load="ldg", store="plain", vec_bytes=16)
    found = vec.neighbours(SEED, bf16, config)
    # 5 other blocks, 2 other loads, 1 other store, 2 other widths: every one valid at the seed
    assert len(found) == 5 + 2 + 1 + 2 and config not in found
    for other in found:
        assert sum(a != b for a, b in zip(config.params, other.params, strict=True)) == 1
        assert vec.rejection(SEED, bf16, other) is None
    # where a width cannot serve the shape (HD 6 in fp32: no 16-byte words), it is no neighbour
    narrow = Shape(1, 8, 4, 2, 6)
    small = Config.of("vec", block=256, load="ldg", store="plain", vec_bytes=4)
    assert {c.values["vec_bytes"] for c in vec.neighbours(narrow, DTYPES["fp32"], small)} == {4, 8}
    with pytest.raises(InvalidConfig):
        vec.neighbours(SEED, bf16, Config.of("split", block=256))
