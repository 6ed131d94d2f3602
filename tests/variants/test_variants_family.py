"""variants.family: the hooks a family writes, and the API every caller uses."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pytest

from variants import BASELINE, DTYPES, FAMILIES, Config, InvalidConfig, Shape
from variants.dtypes import DType
from variants.family import HERE, Family, Launch, Param

SEED = Shape(8, 1024, 32, 8, 128)
ODD = Shape(2, 3, 8, 2, 33)
HUGE = Shape(2, 65536, 64, 8, 128)  # dout has 3.2e9 elements
BF16 = DTYPES["bf16"]

PUBLIC_API = {
    # class attributes and hooks a family writes
    "name",
    "doc",
    "params",
    "template_args",
    "launch",
    "reject",
    "grid_terms",
    "min_compute_capability",
    "layout_free",
    "warp_heads",
    "template_path",
    "template_of",
    "kernel_prefix",
    "template_dir",
    # derived
    "kernel",
    "source",
    "source_hash",
    "compile_options",
    "space",
    "validate",
    "completed",
    "rejection",
    "valid_configs",
    "neighbours",
    "name_expression",
    "geometry",
}


class Minimal(Family):
    """Only what a family must write: no `reject`, so every point serves every shape."""

    name = "minimal"
    doc = "a family for tests"
    params = (Param("block", (32, 64), "threads per block"), Param("width", (1, 2, 4), "elements"))

    def template_args(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> list[str]:
        return [dtype.ctype, str(p["width"])]

    def launch(self, shape: Shape, dtype: DType, p: Mapping[str, Any], sm_count: int) -> Launch:
        return Launch(sm_count * p["width"], p["block"])


class Picky(Minimal):
    name = "picky"

    def reject(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> str | None:
        return f"HD={shape.HD} is odd" if shape.HD % 2 and p["width"] > 1 else None


def test_a_family_without_a_hook_cannot_be_instantiated() -> None:
    class NoLaunch(Family):
        name = "no_launch"
        doc = "lacks launch"
        params = ()

        def template_args(self, shape, dtype, p):
            return [dtype.ctype]

    class NoTemplateArgs(Family):
        name = "no_template_args"
        doc = "lacks template_args"
        params = ()

        def launch(self, shape, dtype, p, sm_count):
            return Launch(1, 32)

    with pytest.raises(TypeError, match="launch"):
        NoLaunch()
    with pytest.raises(TypeError, match="template_args"):
        NoTemplateArgs()
    with pytest.raises(TypeError):
        Family()


def test_a_concrete_family_must_declare_its_class_attributes() -> None:
    with pytest.raises(TypeError, match="does not declare doc, params"):

        class Undeclared(Family):
            name = "undeclared"

            def template_args(self, shape, dtype, p):
                return [dtype.ctype]

            def launch(self, shape, dtype, p, sm_count):
                return Launch(1, 32)

    class Intermediate(Family):  # still abstract: may leave them to its subclasses
        def template_args(self, shape, dtype, p):
            return [dtype.ctype]


def test_the_public_api_has_no_synonyms() -> None:
    public = {n for n in dir(Family) if not n.startswith("_")} | {"name", "doc", "params"}
    assert public == PUBLIC_API
    assert all(isinstance(family, Family) for family in FAMILIES.values())


def test_derived_members_of_a_minimal_family() -> None:
    family = Minimal()
    assert family.kernel == "repkv_minimal"
    assert family.template_path == HERE / "minimal.cu"
    assert family.compile_options == ("-std=c++17",)
    space = list(family.space())
    assert len(space) == 2 * 3 and len(set(space)) == 6
    assert space[0] == Config.of("minimal", block=32, width=1)
    # the default `reject` accepts every point for every shape
    assert family.valid_configs(ODD, BF16) == space
    config = Config.of("minimal", block=64, width=4)
    assert family.rejection(ODD, BF16, config) is None
    assert family.name_expression(ODD, BF16, config) == "repkv_minimal<__nv_bfloat16, 4>"
    assert family.geometry(ODD, BF16, config, 132) == Launch(528, 64)


def test_validate_returns_the_params_or_says_what_is_wrong() -> None:
    family = Minimal()
    assert family.validate(Config.of("minimal", block=32, width=2)) == {"block": 32, "width": 2}
    cases = [
        (Config.of("picky", block=32, width=2), "picky[block=32,width=2] does not belong to family minimal"),
        (Config.of("minimal", block=32, width=2, x=1), "minimal has no parameter x; it takes block, width"),
        (Config.of("minimal", block=32), "minimal[block=32] lacks parameter width"),
        (Config.of("minimal", block=48, width=2), "minimal.block=48 is outside its choices [32, 64]"),
    ]
    for config, message in cases:
        with pytest.raises(InvalidConfig, match=re.escape(message)):
            family.validate(config)
        # every method that takes a Config checks it the same way
        for call in (family.rejection, family.name_expression):
            with pytest.raises(InvalidConfig, match=re.escape(message)):
                call(SEED, BF16, config)
        with pytest.raises(InvalidConfig, match=re.escape(message)):
            family.geometry(SEED, BF16, config, 132)


def test_rejection_gives_the_reason_and_the_rest_refuses_the_config() -> None:
    family = Picky()
    wide = Config.of("picky", block=32, width=4)
    assert family.rejection(SEED, BF16, wide) is None
    assert family.rejection(ODD, BF16, wide) == "HD=33 is odd"
    assert family.valid_configs(ODD, BF16) == [
        Config.of("picky", block=32, width=1),
        Config.of("picky", block=64, width=1),
    ]
    refused = f"picky[block=32,width=4] cannot serve {ODD} bf16: HD=33 is odd"
    with pytest.raises(InvalidConfig, match=re.escape(refused)):
        family.name_expression(ODD, BF16, wide)
    with pytest.raises(InvalidConfig, match=re.escape(refused)):
        family.geometry(ODD, BF16, wide, 132)


def test_geometry_and_name_expression_are_the_hooks_on_the_checked_params() -> None:
    for shape in (SEED, ODD, HUGE):
        for dtype in DTYPES.values():
            for family in FAMILIES.values():
                for config in family.valid_configs(shape, dtype)[:7]:
                    p = family.validate(config)
                    assert family.rejection(shape, dtype, config) is None
                    assert family.geometry(shape, dtype, config, 132) == family.launch(shape, dtype, p, 132)
                    args = ", ".join(family.template_args(shape, dtype, p))
                    assert family.name_expression(shape, dtype, config) == f"{family.kernel}<{args}>"
    naive = FAMILIES["naive"]
    assert "2^31" in naive.rejection(HUGE, BF16, BASELINE)
    with pytest.raises(InvalidConfig, match="cannot serve"):
        naive.geometry(HUGE, BF16, BASELINE, 132)


def test_grid_terms_give_the_launch_grid_of_every_family() -> None:
    import random

    from variants import DTYPES, FAMILIES
    from variants.family import ceil_div

    rng = random.Random(3)
    checked = 0
    for _ in range(150):  # each shape enumerates every family's valid space: ~50 ms a shape
        nh_kv = rng.choice([1, 2, 4, 8])
        shape = Shape(
            rng.randint(1, 64),
            rng.randint(1, 5000),
            nh_kv * rng.choice([1, 2, 3, 7]),
            nh_kv,
            rng.choice([8, 64, 72, 80, 128, 160, 256]),
        )
        dtype = rng.choice(list(DTYPES.values()))
        for family in FAMILIES.values():
            for config in family.valid_configs(shape, dtype)[:3]:
                terms = family.grid_terms(shape, dtype, config.values)
                if terms is None:  # bulk: a grid that depends on the GPU
                    assert family.name == "bulk"
                    continue
                grid = sum(scale * ceil_div(shape.tokens * a, b) for scale, a, b in terms)
                assert grid == family.geometry(shape, dtype, config, 132).grid, (family.name, shape, config)
                checked += 1
    assert checked > 400
