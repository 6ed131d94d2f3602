"""The fused RoPE ops' families on the CPU: launches, rules, kernels and (with NVRTC) a compiled sample."""

from __future__ import annotations

import itertools

import pytest
from rope_ops_helpers import BF16, OPS, SHAPES

from tuner.cli.check import CHECK_SHAPES
from variants.dtypes import DTYPES
from variants.repkv_rope_backward import OP as BACKWARD
from variants.rope_repkv_forward import OP as FORWARD
from variants.shape import INT32_MAX, Shape

HUGE = Shape(2, 65536, 64, 8, 128)  # past 2^31 elements: 64-bit indices


# --- the families -----------------------------------------------------------------------------
FAMILY_SHAPES = (
    *SHAPES,
    Shape(8, 1024, 32, 8, 128),
    Shape(5, 1, 8, 2, 96),
    Shape(3, 7, 28, 4, 256),
    Shape(2, 333, 16, 1, 80),
    HUGE,
)


def cases():
    for op in OPS:
        for name, family in op.families.items():
            yield pytest.param(op, family, id=f"{op.name}.{name}")


COMPILED_LAYOUT = ("flat", "split", "warp_sum")  # families with the head layout in their template arguments
# launch-bounded to one block an SM (__launch_bounds__(BLOCK or 256, 1)): no register cap
ONE_BLOCK_BOUND = (*COMPILED_LAYOUT, "split_runtime")


@pytest.mark.parametrize(("op", "family"), list(cases()))
def test_launch_and_grid_terms_agree_and_cover_the_output(op, family) -> None:
    checked = 0
    for shape in FAMILY_SHAPES:
        for dtype in DTYPES.values():
            for config in family.valid_configs(shape, dtype):
                p = config.values
                launch = family.geometry(shape, dtype, config, 132)
                terms = family.grid_terms(shape, dtype, p)
                assert sum(t.blocks(shape.tokens) for t in terms) == launch.grid, (shape, config)
                assert launch.block == p["block"]
                per_thread = p.get("vec_bytes", dtype.itemsize) // dtype.itemsize * p.get("words", 1)
                work = shape.tokens * family.token_heads(shape) * shape.HD
                if family.name in ("split", "split_runtime"):  # query-word blocks, then K/V-word blocks
                    q_blocks, kv_blocks = family.blocks(shape, dtype, p)
                    hdv = shape.HD * dtype.itemsize // p["vec_bytes"]
                    kv_items = family.kv_items(shape, p) if family.name == "split" else p["kv_items"]
                    covered = [
                        (q_blocks, p["items"], shape.NH * hdv),
                        (kv_blocks, kv_items, 2 * shape.NH_KV * hdv),
                    ]
                    for blocks, items, words in covered:
                        per_block = launch.block * items
                        assert (blocks - 1) * per_block < shape.tokens * words <= blocks * per_block
                    assert q_blocks + kv_blocks == launch.grid
                    checked += 1
                    continue
                if family.warp_heads:  # query-word blocks, then a warp per K/V group
                    q_blocks, kv_blocks = family.blocks(shape, dtype, p)
                    hdv = shape.HD * dtype.itemsize // p["vec_bytes"]
                    q_per_block, warps = launch.block * p["items"], launch.block // 32
                    q_words, groups = shape.tokens * shape.NH * hdv, shape.tokens * 2 * shape.NH_KV
                    assert (q_blocks - 1) * q_per_block < q_words <= q_blocks * q_per_block
                    assert (kv_blocks - 1) * warps < groups <= kv_blocks * warps
                    assert q_blocks + kv_blocks == launch.grid and 32 % hdv == 0
                    checked += 1
                    continue
                assert (
                    (launch.grid - 1) * launch.block * per_thread
                    < work
                    <= launch.grid * launch.block * per_thread
                )
                checked += 1
    assert checked > 100


def test_the_output_decides_the_threads() -> None:
    s = Shape(2, 3, 6, 2, 8)
    bf16 = BF16
    assert FORWARD.families["naive"].token_heads(s) == 3 * s.NH  # out elements
    assert FORWARD.families["vec"].token_heads(s) == 3 * s.NH  # out words
    assert FORWARD.families["replicate"].token_heads(s) == s.heads_in  # inp words
    assert BACKWARD.families["naive"].token_heads(s) == s.heads_in  # dinp elements
    assert BACKWARD.families["vec"].token_heads(s) == s.heads_in  # dinp words
    assert FORWARD.baseline.key == BACKWARD.baseline.key == "naive[block=128]"
    for op in OPS:
        assert op.families["naive"].name_expression(s, bf16, op.baseline) == f"{op.name}_naive<__nv_bfloat16>"


@pytest.mark.parametrize(("op", "family"), list(cases()))
def test_rejections(op, family) -> None:
    fp32, bf16 = DTYPES["fp32"], BF16
    layout = lambda s: s  # noqa: E731
    if family.name == "rotate_runtime":  # nrep 1 alone: every other layout is rejected first
        for config in family.space():
            assert "nrep=4" in family.rejection(Shape(8, 1024, 32, 8, 128), bf16, config)
        layout = lambda s: Shape(s.B, s.T, s.NH, s.NH, s.HD)  # noqa: E731
    odd = layout(Shape(2, 3, 4, 2, 7))
    for dtype in DTYPES.values():
        for config in family.space():
            assert family.rejection(odd, dtype, config)  # every family needs whole pairs
    if family.name == "naive":
        (config,) = [c for c in family.space() if c.values["block"] == 128]
        assert "2^31" in family.rejection(HUGE, bf16, config)
        assert family.rejection(Shape(8, 1024, 32, 8, 128), bf16, config) is None
        assert "odd" in family.rejection(odd, bf16, config)
        return
    if family.warp_heads:  # a head's words must divide a warp's 32 lanes
        for config in family.space():
            vec_bytes = config.values["vec_bytes"]
            hd10 = family.rejection(Shape(2, 3, 4, 2, 10), fp32, config)  # 5 words of 8 bytes
            assert ("divide a warp" if vec_bytes == 8 else "not divisible") in hd10
            hd96 = family.rejection(Shape(2, 3, 4, 2, 96), bf16, config)  # 12 or 24 words
            assert f"is {96 * 2 // vec_bytes} words" in hd96
            assert family.rejection(Shape(2, 3, 4, 2, 64), bf16, config) is None
            assert family.rejection(HUGE, bf16, config) is None
        return
    # flat's own rules (replica groups, 4 words with 64-bit indices) are tested in test_layout_family
    plain = [c for c in family.space() if c.values.get("group", 2) == 2 and c.values.get("words", 1) < 4]
    for config in plain:
        p = config.values
        reason = family.rejection(layout(Shape(2, 3, 4, 2, 10)), fp32, config)
        if p["vec_bytes"] == 4:
            assert "less than one RoPE pair" in reason  # one fp32 element a word
        elif p["vec_bytes"] == 16:
            assert "not divisible" in reason  # HD 10 is not a multiple of 4 floats
        else:
            assert reason is None
        # bf16: 16 bytes are 8 elements, which HD 12 does not hold a whole number of
        hd12 = layout(Shape(2, 3, 4, 2, 12))
        assert (family.rejection(hd12, bf16, config) is None) == (p["vec_bytes"] != 16)
        assert family.rejection(layout(HUGE), bf16, config) is None
        assert family.name_expression(layout(HUGE), bf16, config).endswith("long long>")
        assert family.name_expression(layout(Shape(8, 1024, 32, 8, 128)), bf16, config).endswith(", int>")


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_a_config_is_one_kernel_at_every_shape(op) -> None:
    """Template arguments depend on the shape only through the index type, so a family's distinct
    kernels over tuner.cli.check's shapes and the three dtypes never outnumber its configurations
    times dtypes times index types; `flat` and `split`,
    which compile the head layout in, are the exceptions (test_layout_family)."""
    small = [s for s in CHECK_SHAPES if s.tokens * 3 * s.NH * s.HD <= INT32_MAX]
    runtime_layout = [f for f in op.families.values() if f.name not in COMPILED_LAYOUT]
    for family in runtime_layout:
        for dtype in DTYPES.values():
            per_shape = [
                {c: family.name_expression(s, dtype, c) for c in family.valid_configs(s, dtype)}
                for s in small
            ]
            for a, b in itertools.pairwise(per_shape):
                assert all(a[c] == b[c] for c in a.keys() & b.keys())
    for family in runtime_layout:
        distinct = {
            family.name_expression(shape, dtype, config)
            for shape in CHECK_SHAPES
            for dtype in DTYPES.values()
            for config in family.valid_configs(shape, dtype)
        }
        # at most one kernel a configuration, dtype and index type (int or long long), at any shape
        assert 0 < len(distinct) <= sum(1 for _ in family.space()) * len(DTYPES) * 2, family.name


# --- NVRTC ------------------------------------------------------------------------------------
def nvrtc_or_skip():
    nvrtc = pytest.importorskip("variants.nvrtc")
    try:
        nvrtc.nvrtc_version()
    except nvrtc.NvrtcUnavailable as exc:
        pytest.skip(str(exc))
    return nvrtc


@pytest.mark.parametrize(("op", "family"), list(cases()))
def test_a_sample_compiles_for_sm90_without_spills(op, family) -> None:
    nvrtc = nvrtc_or_skip()
    seed, huge = Shape(8, 1024, 32, 8, 128), HUGE
    if family.name == "rotate_runtime":  # nrep 1 alone
        seed, huge = Shape(8, 1024, 32, 32, 128), Shape(2, 65536, 48, 48, 128)
    expressions: dict[str, None] = {}
    for shape in (seed, huge):
        for dtype in DTYPES.values():
            configs = family.valid_configs(shape, dtype)
            for config in configs[:: max(1, len(configs) // 4)]:
                expressions[family.name_expression(shape, dtype, config)] = None
    if family.name != "naive":
        assert any(e.endswith("long long>") for e in expressions)
    reports = nvrtc.compile_expressions(family, list(expressions), arch="sm_90")
    assert len(reports) == len(expressions)
    for report in reports:
        assert report.ok, report.error
        assert not report.spills, report
        # the compiled-layout families are launch-bounded to one block an SM: no register cap
        assert 0 < report.registers <= (64 if family.name not in ONE_BLOCK_BOUND else 255), report
