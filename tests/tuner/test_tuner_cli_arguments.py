"""The tuner's command line: its subcommands, flag lists and defaults, check, variants, progress bars."""

from __future__ import annotations

import sys

import optuna
import pytest
import tuner_fakes as F
from cli_helpers import SMALL, _refused

from tuner.cli.main import main
from variants import DTYPES, FAMILIES

optuna.logging.set_verbosity(optuna.logging.WARNING)


def test_variants_lists_families_params_and_valid_counts(capsys) -> None:
    assert main(["variants", "--shape", SMALL, "--dtype", "bf16"]) == 0
    out = capsys.readouterr().out
    for name in FAMILIES:
        assert f"{name}:" in out
    total = sum(len(f.valid_configs(F.SMALL, DTYPES["bf16"])) for f in FAMILIES.values())
    assert f"all families at {SMALL}: bf16 {total}" in out


def test_variants_lists_the_families_of_the_op_asked_for(capsys) -> None:
    from variants import get_op

    op = get_op("repkv_rope_backward")
    assert main(["variants", "--op", op.name, "--shape", SMALL, "--dtype", "bf16"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{op.name}: {len(op.families)} families")
    listed = {line.split(":")[0] for line in out.splitlines() if not line.startswith((" ", "all", op.name))}
    assert listed == set(op.families)
    total = sum(len(f.valid_configs(F.SMALL, DTYPES["bf16"])) for f in op.families.values())
    assert f"all families at {SMALL}: bf16 {total}" in out
    assert main(["variants", "--op", "no_such_op"]) == 2
    assert "no_such_op" in capsys.readouterr().err


def test_every_subcommand_of_the_parser_has_a_command() -> None:
    from tuner.cli.main import COMMANDS
    from tuner.cli.parser import SUBCOMMANDS

    assert list(COMMANDS) == list(SUBCOMMANDS)


# --- lists: repeats and comma lists everywhere ----------------------------------------------
def test_shapes_take_repeats_and_lists_of_several_in_one_value(capsys) -> None:
    from tuner.cli.arguments import parse_shapes
    from tuner.cli.parser import build_parser

    seed = "B=8,T=1024,NH=32,NH_KV=8,HD=128"
    args = build_parser().parse_args(["tune", "--shape", f"{SMALL},{seed}", "--shape", SMALL])
    assert [s.key for s in parse_shapes(args)] == [SMALL, seed]
    assert main(["variants", "--shape", f"{SMALL},{seed}", "--dtype", "bf16,fp16"]) == 0
    out = capsys.readouterr().out
    assert f"all families at {SMALL}: bf16" in out and f"all families at {seed}: bf16" in out
    assert ", fp16 " in out


def test_family_takes_repeats_and_lists_and_defaults_to_every_family() -> None:
    from tuner.cli.parser import build_parser, tune_request

    args = build_parser().parse_args(["tune", "--family", "tile,split", "--family", "tile"])
    assert tune_request(args).families == ("tile", "split")
    assert tune_request(build_parser().parse_args(["tune"])).families == ()
    assert main(["tune", "--family", "nope", "--shape", SMALL]) == 2


def test_hold_us_reaches_the_request_and_defaults_to_the_tuners_hold() -> None:
    from results.schema import DEFAULT_HOLD_US
    from tuner.cli.parser import build_parser, tune_request

    assert tune_request(build_parser().parse_args(["tune", "--hold-us", "0"])).hold_us == 0.0
    assert tune_request(build_parser().parse_args(["tune"])).hold_us == DEFAULT_HOLD_US == 150.0


@pytest.fixture
def fake_nvrtc(monkeypatch):
    """compile_all and nvrtc_version without NVRTC: every kernel compiles; calls are kept."""
    import variants.nvrtc as nvrtc

    calls: list[tuple[str, list[str]]] = []

    def compile_all(pairs, arch="sm_90", keep_ptx=False, threads=0, on_done=None):
        expressions = list(dict.fromkeys(e for _, e in pairs))
        calls.append((arch, expressions))
        for _ in expressions:
            if on_done is not None:
                on_done(1)
        return [nvrtc.KernelReport(e, ok=True, registers=24) for e in expressions]

    monkeypatch.setattr(nvrtc, "compile_all", compile_all)
    monkeypatch.setattr(nvrtc, "nvrtc_version", lambda: "13.0")
    return calls


def test_check_takes_comma_lists_and_repeats_like_tune(fake_nvrtc, capsys) -> None:
    seed = "B=8,T=1024,NH=32,NH_KV=8,HD=128"
    argv = [
        "check",
        "--dtype",
        "bf16,fp16",
        "--dtype",
        "fp32",
        "--family",
        "naive,vec",
        "--arch",
        "sm_90,sm_80",
    ]
    assert main([*argv, "--shape", f"{SMALL},{seed}", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert [arch for arch, _ in fake_nvrtc] == ["sm_90", "sm_80"]
    assert "over 2 shapes" in out
    for family in ("naive", "vec"):
        for dtype in ("fp32", "bf16", "fp16"):
            assert f"  {family:<14} {dtype:<5}" in out
    assert "gather" not in out and "split" not in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--dtype", "bf16,fp8"], "unknown dtype 'fp8'"),
        (["--family", "vec,tiled"], "unknown family 'tiled'"),
        (["--arch", "90"], "--arch '90'"),
        (["--shape", "B=8,B=9"], "B is given twice"),
    ],
)
def test_check_refuses_a_bad_list_in_one_line(fake_nvrtc, capsys, argv: list[str], message: str) -> None:
    assert message in _refused(["check", *argv], capsys)
    assert fake_nvrtc == []


def test_check_of_shapes_no_configuration_serves_is_refused(fake_nvrtc, capsys) -> None:
    # it compiled nothing, printed "0 failed, 0 spilled" and exited 0, as a pass does
    argv = [
        "check",
        "--op",
        "rope_repkv_forward",
        "--family",
        "naive",
        "--shape",
        "B=1,T=8,NH=4,NH_KV=2,HD=7",
    ]
    line = _refused(argv, capsys)
    assert line.startswith("error: nothing to check: all 18 configurations are rejected (the first: ")
    assert line.endswith("at B=1,T=8,NH=4,NH_KV=2,HD=7 fp32: HD=7 is odd: RoPE rotates (2i, 2i+1) pairs)")
    assert fake_nvrtc == [] and capsys.readouterr().out == ""


# --- progress --------------------------------------------------------------------------------
def test_progress_only_on_a_terminal_and_not_with_no_progress(monkeypatch) -> None:
    import argparse

    from tuner.cli.arguments import show_progress

    monkeypatch.setattr(sys, "stderr", type("Tty", (), {"isatty": lambda self: True})())
    assert show_progress(argparse.Namespace(no_progress=False))
    assert not show_progress(argparse.Namespace(no_progress=True))
    monkeypatch.setattr(sys, "stderr", type("Pipe", (), {"isatty": lambda self: False})())
    assert not show_progress(argparse.Namespace(no_progress=False))


def test_check_shows_a_progress_bar_per_architecture(fake_nvrtc, monkeypatch, capsys) -> None:
    import tuner.cli.main

    monkeypatch.setattr(tuner.cli.main, "show_progress", lambda args: not args.no_progress)
    assert (
        main(["check", "--family", "naive", "--dtype", "bf16", "--shape", SMALL, "--arch", "sm_90,sm_80"])
        == 0
    )
    err = capsys.readouterr().err
    kernels = len(fake_nvrtc[0][1])
    assert "sm_90 compile: 100%" in err and "sm_80 compile: 100%" in err and f"{kernels}/{kernels}" in err
    assert main(["check", "--family", "naive", "--dtype", "bf16", "--shape", SMALL, "--no-progress"]) == 0
    assert "compile:" not in capsys.readouterr().err


# --- variants: why configurations are excluded ------------------------------------------------
def test_variants_groups_exclusions_by_reason(capsys) -> None:
    odd = "B=3,T=7,NH=28,NH_KV=4,HD=250"  # HD=250: only 2-element vectors divide it
    assert main(["variants", "--shape", odd, "--dtype", "bf16"]) == 0
    out = capsys.readouterr().out
    vec = out[out.index("\nvec:") : out.index("\nwarp_per_head:")]
    excluded = sum(1 for c in FAMILIES["vec"].space()) - len(
        FAMILIES["vec"].valid_configs(F.Shape.parse(odd), DTYPES["bf16"])
    )
    assert f"    bf16 excludes {excluded}:" in vec
    # 4- and 8-byte vectors fail alike: one group, its numbers set aside
    assert f"      {excluded:>4}  HD=250 is not divisible by the vector width N (N bytes of bf16)" in vec


def test_l2_reaches_the_request_defaults_to_cold_and_refuses_other_states(capsys) -> None:
    from tuner.cli.parser import build_parser, tune_request

    assert tune_request(build_parser().parse_args(["tune", "--l2", "fed"])).l2 == "fed"
    assert tune_request(build_parser().parse_args(["tune"])).l2 == "cold"
    assert main(["tune", "--l2", "warm", "--shape", SMALL]) == 2
    assert "--l2: invalid choice: 'warm' (choose from 'cold', 'fed')" in capsys.readouterr().err
