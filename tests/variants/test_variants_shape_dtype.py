from __future__ import annotations

import pytest

from variants import DTYPES, Config, InvalidShape, Shape, UnknownDType, get_dtype, get_family


def test_seed_shape_sizes() -> None:
    s = Shape(8, 1024, 32, 8, 128)
    assert s.nrep == 4
    assert s.heads_in == 48
    assert s.dout_numel == 8 * 1024 * 3 * 32 * 128
    assert s.dinp_numel == 8 * 1024 * 48 * 128
    assert s.bytes_moved(DTYPES["bf16"]) == (s.dout_numel + s.dinp_numel) * 2
    assert Shape.parse(s.key) == s
    assert Shape.parse("HD=128, NH_KV=8,NH=32,T=1024,B=8") == s


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"B": 0, "T": 1, "NH": 4, "NH_KV": 2, "HD": 8}, "B must be >= 1"),
        ({"B": 1, "T": -3, "NH": 4, "NH_KV": 2, "HD": 8}, "T must be >= 1"),
        ({"B": 1, "T": 1, "NH": 6, "NH_KV": 4, "HD": 8}, "not divisible by NH_KV=4"),
        ({"B": 1, "T": 1, "NH": 4, "NH_KV": 2, "HD": 2**30}, "larger than the limit"),
        ({"B": 1.5, "T": 1, "NH": 4, "NH_KV": 2, "HD": 8}, "B must be an integer"),
        ({"B": True, "T": 1, "NH": 4, "NH_KV": 2, "HD": 8}, "B must be an integer"),
    ],
)
def test_invalid_shapes_name_the_problem(kwargs: dict, message: str) -> None:
    with pytest.raises(InvalidShape, match=message):
        Shape(**kwargs)


@pytest.mark.parametrize(
    "text", ["B=8,T=1024", "B=8,T=1024,NH=32,NH_KV=8,HD=x", "Q=1,B=1,T=1,NH=1,NH_KV=1,HD=1"]
)
def test_parse_rejects_malformed_text(text: str) -> None:
    with pytest.raises(InvalidShape):
        Shape.parse(text)


def test_parse_refuses_a_name_given_twice() -> None:
    # before, the last value won silently: B=9
    with pytest.raises(InvalidShape, match="B is given twice"):
        Shape.parse("B=8,T=1024,NH=32,NH_KV=8,HD=128,B=9")


def test_unknown_dtype() -> None:
    with pytest.raises(UnknownDType, match="expected one of fp32, bf16, fp16"):
        get_dtype("fp8")


def test_tolerances_grow_with_nrep_and_shrink_with_precision() -> None:
    fp32, bf16 = DTYPES["fp32"], DTYPES["bf16"]
    assert fp32.tolerance(8, 4.0)[0] > fp32.tolerance(1, 4.0)[0]
    assert bf16.tolerance(4, 4.0)[1] > fp32.tolerance(4, 4.0)[1]


# --- the limits of the kernels and the header (issue: shapes that cannot exist) -------------


def test_a_shape_past_what_the_kernels_launch_is_refused_naming_the_limit() -> None:
    # B=T=2^24: 2^48 tokens, dinp past 2^60 elements, dout's bytes past int64; before, a Shape
    from variants.shape import MAX_ELEMENTS

    with pytest.raises(InvalidShape, match=f"over the kernels' limit {MAX_ELEMENTS}") as caught:
        Shape(2**24, 2**24, 32, 8, 128)
    assert caught.value.field == "B"
    # named for every op: the backward ops' output, the forward ops' input (it said "dinp" alone)
    assert "the backward ops' dinp, the forward ops' inp" in str(caught.value)
    with pytest.raises(InvalidShape, match="over the kernels' limit"):
        Shape.parse("B=16777216,T=16777216,NH=32,NH_KV=8,HD=128")  # the command line's --shape


def test_a_shape_past_the_limit_by_its_head_size_blames_the_head_size() -> None:
    with pytest.raises(InvalidShape, match=r"8192\*48\*16777216") as caught:
        Shape(8, 1024, 32, 8, 2**24)
    assert caught.value.field == "HD"
    with pytest.raises(InvalidShape) as caught:
        Shape(8, 1024, 2**23, 2**22, 64)
    assert caught.value.field == "NH"


def test_the_element_limit_is_the_generic_launch_within_cudas_grid() -> None:
    from results.selection import GENERIC_BLOCK
    from variants.family import MAX_GRID
    from variants.shape import MAX_ELEMENTS

    assert MAX_ELEMENTS == GENERIC_BLOCK * MAX_GRID
    # 5 x 2^24 tokens of 48 heads of 128: the most tokens of that layout within the limit
    largest = Shape(5, 2**24, 32, 8, 128)
    with pytest.raises(InvalidShape):
        Shape(6, 2**24, 32, 8, 128)
    gather = get_family("gather")
    at_256 = Config.of("gather", block=GENERIC_BLOCK, load="plain", store="plain")
    assert gather.geometry(largest, DTYPES["bf16"], at_256, 0).grid <= MAX_GRID


@pytest.mark.parametrize("HD", [1, 33, 65537])
def test_any_head_dimension_is_a_shape_gather_serves(HD: int) -> None:
    # HD need not be a multiple of a vector width: gather and naive take one element a thread
    shape = Shape(8, 1024, 32, 8, HD)
    gather = get_family("gather")
    assert gather.valid_configs(shape, DTYPES["bf16"])


def test_flat_refuses_a_token_row_past_its_32_bit_indices() -> None:
    # flat compiles 3*NH*HDV (a token's dout row in words) as an int constant: past 2^31-1 it
    # would not compile (before, flat took the shape)
    flat = get_family("flat")
    shape = Shape(1, 1, 2**22, 2**22, 2**12)  # 3*2^22*2^12 = 3*2^34 elements a token
    assert flat.valid_configs(shape, DTYPES["fp32"]) == []
    reasons = {flat.rejection(shape, DTYPES["fp32"], c) for c in flat.space()}
    assert any("32-bit" in r for r in reasons if r)
    assert flat.valid_configs(Shape(1, 1, 2**10, 2**10, 2**9), DTYPES["fp32"])


def test_dtype_names_are_read_in_any_case() -> None:
    assert get_dtype("BF16") is DTYPES["bf16"] and get_dtype("Fp32") is DTYPES["fp32"]
    with pytest.raises(UnknownDType):
        get_dtype(None)  # type: ignore[arg-type]
