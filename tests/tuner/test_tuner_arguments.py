from __future__ import annotations

import argparse
import re

import pytest

from tuner.cli import arguments as A
from variants import Shape

SMALL = "B=1,T=256,NH=14,NH_KV=2,HD=64"
SEED = "B=8,T=1024,NH=32,NH_KV=8,HD=128"


def test_lists_are_repeats_or_comma_lists_or_both() -> None:
    assert A.csv_values(["bf16,fp16", " fp32 ", ""]) == ["bf16", "fp16", "fp32"]
    assert A.parse_dtypes(["bf16,fp16", "bf16"]) == ["bf16", "fp16"]
    assert A.parse_dtypes(None) == ["fp32", "bf16", "fp16"]
    assert A.parse_archs(["sm_90,sm_80", "sm_100a"], ("sm_90",)) == ["sm_90", "sm_80", "sm_100a"]
    assert A.parse_choices(["vec", "naive,vec"], ["naive", "vec"], "--family", ["naive"]) == ["vec", "naive"]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: A.parse_dtypes(["bf16,fp8"]), "unknown dtype 'fp8': use --dtype with fp32, bf16, fp16"),
        (lambda: A.parse_archs(["90"], ()), "--arch '90'"),
        (lambda: A.parse_choices(["tiled"], ["vec"], "--family", []), "unknown family 'tiled': use --family"),
    ],
)
def test_an_unknown_name_is_a_usage_error(call, message: str) -> None:
    with pytest.raises(A.UsageError, match=message):
        call()


@pytest.mark.parametrize("text", ["", " ", ",", " , "])
@pytest.mark.parametrize(
    ("flag", "call"),
    [
        ("--dtype", lambda v: A.parse_dtypes(["bf16", v])),
        ("--family", lambda v: A.parse_choices([v], ["vec"], "--family", ["vec"])),
        ("--arch", lambda v: A.parse_archs([v], ("sm_90",))),
        (
            "--model",
            lambda v: A.parse_shapes(argparse.Namespace(shape=None, batch=None, seq=None, model=[v])),
        ),
        (
            "--seq",
            lambda v: A.parse_shapes(
                argparse.Namespace(shape=None, batch=None, seq=[v], model=["gpt2-124m"])
            ),
        ),
    ],
)
def test_a_list_value_that_names_nothing_is_refused_not_read_as_the_default(
    flag: str, call, text: str
) -> None:
    with pytest.raises(A.UsageError, match=re.escape(f"{flag} {text!r} names nothing")):
        call(text)


def test_one_shape_value_may_hold_several_shapes() -> None:
    assert A.split_shapes(f"{SMALL},{SEED}") == [SMALL, SEED]
    assert A.split_shapes("HD=64,B=1,T=256,NH=14,NH_KV=2") == ["HD=64,B=1,T=256,NH=14,NH_KV=2"]
    shapes = A.parse_shape_values([f"{SMALL},{SEED}", SMALL])
    assert shapes == [Shape.parse(SMALL), Shape.parse(SEED)]  # each once, in order


@pytest.mark.parametrize("text", ["", " ", ",", " , "])
def test_a_shape_value_with_no_shape_is_refused_not_read_as_the_default_set(text: str) -> None:
    with pytest.raises(A.UsageError, match=re.escape("names no shape: give B=..,T=..,NH=..,NH_KV=..,HD=..")):
        A.parse_shape_values([SMALL, text])


@pytest.mark.parametrize("text", ["B=8,B=9", "B=8,T=1024,B=9,NH=32,NH_KV=8,HD=128"])
def test_a_name_given_twice_in_one_shape_is_refused_not_overwritten(text: str) -> None:
    with pytest.raises(A.UsageError, match="B is given twice"):
        A.parse_shape_values([text])


@pytest.mark.parametrize(
    ("text", "lacks"),
    [
        (f"{SEED},B=9", "'B=9' lacks T, NH, NH_KV, HD"),
        (f"{SEED},B=1,T=256", "'B=1,T=256' lacks NH, NH_KV, HD"),
    ],
)
def test_a_name_again_that_starts_no_whole_shape_is_given_twice(text: str, lacks: str) -> None:
    with pytest.raises(A.UsageError, match="B is given twice in shape") as refused:
        A.parse_shape_values([text])
    assert f"{text!r}" in str(refused.value) and lacks in str(refused.value)
    with pytest.raises(A.UsageError, match="cannot read 'X=3'"):  # a name that is none of the five
        A.parse_shape_values([f"{SEED},B=9,X=3"])


@pytest.mark.parametrize(
    ("kind", "text", "message"),
    [
        (A.seed, "-5", "from 0 to 4294967295"),
        (A.seed, str(2**32), "from 0 to 4294967295"),
        (A.seed, "x", "from 0 to"),
        (A.time_limit, "0", "above 0 (leave it out for no limit)"),
        (A.time_limit, "-1", "above 0"),
        (A.time_limit, "nan", "above 0"),
        (A.positive_seconds, "0", "above 0"),
        (A.positive_int, "0", "at least 1"),
        (A.nonnegative_int, "-1", "at least 0"),
        (A.nonnegative_fraction, "-1", "at least 0"),
        (A.nonnegative_fraction, "inf", "at least 0"),
        (A.positive_number, "0", "above 0"),
        (A.directory, "", "not an empty string"),
        (A.directory, "  ", "not an empty string"),
        (A.nonempty, "", "not an empty string"),
    ],
)
def test_argument_types_refuse_values_that_would_run_wrong(kind, text: str, message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        kind(text)


def test_argument_types_accept_their_range() -> None:
    assert A.seed("0") == 0 and A.seed(str(2**32 - 1)) == 2**32 - 1
    assert A.time_limit("0.5") == 0.5
    assert A.nonnegative_fraction("0") == 0.0
    assert A.positive_int("3") == 3
    assert str(A.directory("results")) == "results"


def _float_flags() -> list[tuple[str, str, object]]:
    """(subcommand, flag, type) of every flag of `python -m tuner` that reads a float."""
    from tuner.cli.parser import build_parser

    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    flags = []
    for command, subparser in sub.choices.items():
        for action in subparser._actions:
            kind = action.type
            if kind is float or getattr(kind, "kind", None) is float:
                flags.append((command, action.option_strings[-1], kind))
    return flags


def test_every_float_flag_reads_a_checked_type_that_refuses_nan_and_infinities() -> None:
    flags = _float_flags()
    names = {flag for _, flag, _ in flags}
    assert {"--heartbeat", "--replay-delay", "--timeout", "--trial-timeout", "--hold-us"} <= names
    assert {"--tolerance", "--target"} <= names
    for command, flag, kind in flags:
        assert kind is not float, f"{command} {flag} reads a bare float"
        for text in ("nan", "NaN", "inf", "-inf", "infinity", "1e999", "-1e999"):
            with pytest.raises(argparse.ArgumentTypeError, match=f"not '{text}'"):
                kind(text)  # type: ignore[operator]


@pytest.mark.parametrize(
    ("kind", "text", "message"),
    [
        (A.heartbeat_seconds, "0.5", "seconds from 1 to 3600"),
        (A.heartbeat_seconds, "3601", "seconds from 1 to 3600"),
        (A.delay_seconds, "-0.1", "seconds from 0 to 3600"),
        (A.delay_seconds, "1e9", "seconds from 0 to 3600"),
        (A.positive_seconds, "1e300", "at most 3600"),
        (A.time_limit, "1e300", "at most 604800"),
    ],
)
def test_seconds_flags_state_their_range(kind, text: str, message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        kind(text)
    assert A.heartbeat_seconds("1") == 1.0 and A.delay_seconds("0") == 0.0


def test_dtype_names_are_read_in_any_case_as_the_service_reads_them() -> None:
    from tuner.cli.arguments import parse_dtypes

    assert parse_dtypes(["BF16,Fp32"]) == ["bf16", "fp32"]
    assert parse_dtypes(None) == ["fp32", "bf16", "fp16"]


def test_shapes_separated_by_a_space_are_a_part_that_cannot_be_read() -> None:
    # it said "T is given twice ... 'T=512,...' lacks B", where B was given, after a space
    text = f"{SEED} {SMALL}"
    with pytest.raises(A.UsageError, match=re.escape("cannot read 'HD=128 B=1' in shape")):
        A.parse_shape_values([text])
