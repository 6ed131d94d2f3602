from __future__ import annotations

import pytest

from variants import DTYPES, InvalidShape, Shape, UnknownDType, get_dtype


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
