"""The chain's `flat` families (variants/layout_family.py): the head layout compiled in, words a
thread, the fused backward's replica groups, and the rules measured on sm_90/sm_80."""

from __future__ import annotations

import pytest

from variants import DTYPES, Config, Shape, get_op
from variants.family import InvalidConfig

SEED = Shape(8, 1024, 32, 8, 128)
MQA = Shape(4, 1024, 48, 1, 128)
HUGE = Shape(2, 65536, 64, 8, 128)  # past 2^31 elements: 64-bit indices
BF16 = DTYPES["bf16"]
OPS = ("repkv_forward", "rope_repkv_forward", "repkv_rope_backward")


def flat(op: str):
    return get_op(op).families["flat"]


def config(op: str, **params) -> Config:
    base = {"block": 128, "vec_bytes": 16, "words": 1, "load": "ldg", "store": "stcs"}
    if op == "repkv_rope_backward":
        base["group"] = 4
    return Config.of("flat", **{**base, **params})


@pytest.mark.parametrize("op", OPS)
def test_the_layout_is_compiled_in_and_the_grid_covers_every_word(op: str) -> None:
    family = flat(op)
    for shape in (SEED, MQA, Shape(3, 7, 28, 4, 256)):
        for words in (1, 2):
            c = config(op, words=words)
            expression = family.name_expression(shape, BF16, c)
            hdv, heads, nrep = (str(shape.HD * 2 // 16), str(shape.heads_in), str(shape.nrep))
            assert f"<__nv_bfloat16, 16, {hdv}, {heads}, {nrep}, 128, {words}, " in expression
            launch = family.geometry(shape, BF16, c, 132)
            per_token = shape.heads_in * shape.HD * 2 // 16  # words of inp / dinp a token
            assert launch.grid * launch.block * words >= shape.tokens * per_token
            assert (launch.grid - 1) * launch.block * words < shape.tokens * per_token
    # another layout, another kernel; another B*T, the same one
    assert family.name_expression(SEED, BF16, config(op)) != family.name_expression(MQA, BF16, config(op))
    assert family.name_expression(SEED, BF16, config(op)) == family.name_expression(
        Shape(2, 333, 32, 8, 128), BF16, config(op)
    )


@pytest.mark.parametrize("op", OPS)
def test_rules_measured_on_the_compilers(op: str) -> None:
    family = flat(op)
    if op != "repkv_rope_backward":  # whose words stop at 2
        assert "1024 words a block" in family.rejection(SEED, BF16, config(op, block=512, words=4))
    assert family.name_expression(HUGE, BF16, config(op)).endswith("long long>")
    if op == "rope_repkv_forward":
        assert "64-bit indices spill" in family.rejection(HUGE, BF16, config(op, words=4))
        assert family.rejection(SEED, BF16, config(op, words=4)) is None
    if op == "repkv_rope_backward":
        with pytest.raises(InvalidConfig):  # 4 words spill there: not in its space
            family.validate(config(op, words=4))
        assert "words in flight" in family.rejection(SEED, BF16, config(op, words=2, group=8))


def test_a_replica_group_is_canonical_and_capped_at_nrep() -> None:
    family = flat("repkv_rope_backward")
    # group is the 8th template argument: replicas loaded together, at most nrep
    assert family.name_expression(SEED, BF16, config("repkv_rope_backward", group=4)).split(", ")[7] == "4"
    assert (
        family.name_expression(Shape(2, 8, 12, 4, 64), BF16, config("repkv_rope_backward", group=4)).split(
            ", "
        )[7]
        == "3"
    )
    # a group past nrep that sums like the next smaller one is left out; the smallest always stays
    assert "as group 4 does" in family.rejection(SEED, BF16, config("repkv_rope_backward", group=8))
    mha = Shape(4, 256, 32, 32, 64)
    assert family.rejection(mha, BF16, config("repkv_rope_backward", group=2)) is None
    assert family.rejection(mha, BF16, config("repkv_rope_backward", group=4)) is not None
    valid = family.valid_configs(SEED, BF16)
    expressions = [family.name_expression(SEED, BF16, c) for c in valid]
    assert len(set(expressions)) == len(expressions)  # no two configurations compile the same kernel
    assert {c.values["group"] for c in valid} == {2, 4}
    assert {c.values["group"] for c in family.valid_configs(MQA, BF16)} == {2, 4, 8}
