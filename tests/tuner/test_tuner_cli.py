from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
import tuner_fakes as F

from results.store import load_results
from tuner.cli.main import main
from variants import DTYPES, FAMILIES

ROOT = Path(__file__).resolve().parents[2]
optuna.logging.set_verbosity(optuna.logging.WARNING)
SMALL = "B=1,T=256,NH=14,NH_KV=2,HD=64"


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("recording")
    F.write_recording(directory, [F.SMALL], ["bf16"])
    return directory


def test_replay_cli_runs_the_study_loop_without_a_gpu(recording: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    argv = ["--gpu", "h200", "--replay", str(recording), "--shape", SMALL, "--dtype", "bf16"]
    rc = main([*argv, "--trials", "10", "--results", str(out), "--no-progress", "--seed", "0"])
    assert rc == 0
    frame, _ = load_results(out)
    assert len(frame) == 10 and frame["config_key"].is_unique
    assert (frame["gpu_name"] == "NVIDIA H200").all()
    assert "Winners on h200" in capsys.readouterr().out


def test_configs_missing_from_a_recording_are_counted_never_written(tmp_path: Path, capsys) -> None:
    rows = F.partial_recording_rows()
    from results.store import write_table

    write_table(rows, tmp_path / "rec" / "h200", "partial")
    argv = ["--replay", str(tmp_path / "rec"), "--shape", SMALL, "--dtype", "bf16", "--sampler", "grid"]
    rc = main([*argv, "--results", str(tmp_path / "out"), "--no-progress", "--storage", "memory"])
    assert rc == 0
    frame, _ = load_results(tmp_path / "out")
    assert set(frame["family"]) == {"naive", "gather"}
    assert "not in the recording" in capsys.readouterr().err


def test_replay_eval_cli(recording: Path, capsys) -> None:
    rc = main(["replay-eval", str(recording), "--seeds", "2", "--max-trials", "30", "--samplers", "random"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "random: median" in out and "target of 25 trials" in out


def test_usage_errors_print_one_line_and_return_2(capsys) -> None:
    for argv in (
        ["--trials", "x"],
        ["--shape", "B=8,T=1024"],
        ["--dtype", "fp8"],
        ["--model", "gpt-5"],
        ["--batch", "8"],
        ["--sampler", "annealing"],
        ["--storage", "nonsense"],
        ["frobnicate"],
    ):
        assert main([*argv, "--replay", "/nonexistent"]) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: "), (argv, err)


def test_a_gpu_label_that_does_not_match_the_device_is_refused(capsys, tmp_path: Path) -> None:
    rc = main(["--gpu", "h100", "--shape", SMALL, "--results", str(tmp_path)], runner=F.synthetic_runner())
    assert rc == 2
    assert "NVIDIA H200" in capsys.readouterr().err
    rc = main(
        [
            *["--gpu", "h100", "--force-gpu-label", "--shape", SMALL, "--dtype", "bf16", "--trials", "3"],
            *["--results", str(tmp_path), "--no-progress", "--storage", "memory"],
        ],
        runner=F.synthetic_runner(),
    )
    assert rc == 0
    assert (tmp_path / "h100").is_dir()


def test_an_interrupted_tune_returns_130_and_says_how_to_resume(capsys, tmp_path: Path) -> None:
    measured: list[str] = []

    def bench(shape, dtype, config):
        measured.append(config.key)
        if len(measured) == 3:
            raise KeyboardInterrupt
        return F.synthetic_bench(shape, dtype, config)

    argv = ["--shape", SMALL, "--dtype", "bf16", "--results", str(tmp_path), "--storage", "memory"]
    runner = F.RecordingRunner(bench)
    assert main([*argv, "--no-progress"], runner=runner) == 130
    err = capsys.readouterr().err
    assert err.rstrip().endswith("interrupted: run the same command again to resume")
    assert "2 rows in " in err and runner.closed


def test_variants_lists_families_params_and_valid_counts(capsys) -> None:
    assert main(["variants", "--shape", SMALL, "--dtype", "bf16"]) == 0
    out = capsys.readouterr().out
    for name in FAMILIES:
        assert f"{name}:" in out
    total = sum(len(f.valid_configs(F.SMALL, DTYPES["bf16"])) for f in FAMILIES.values())
    assert f"all families at {SMALL}: bf16 {total}" in out


def test_best_prints_the_winners_of_a_results_dir(recording: Path, capsys) -> None:
    assert main(["best", "--results", str(recording)]) == 0
    out = capsys.readouterr().out
    assert "Winners" in out and "h200" in out
    assert any(f"{family}[" in out for family in ("split", "tile", "vec"))


def _run(code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_no_package_imports_cupy() -> None:
    modules = [
        "variants",
        "results",
        "results.store",
        "results.best",
        "tuner",
        "tuner.cli.main",
        "tuner.study.loop",
    ]
    modules += [
        "tuner.cli.parser",
        "tuner.runners.replay",
        "tuner.study.replay_eval",
        "tuner.cli.report",
        "tuner.study.storage",
    ]
    modules += [
        "tuner.cli.check",
        "tuner.runners.gpu",
        "tuner.runners.gpu.runner",
        "tuner.runners.gpu.worker",
        "repkv_tune.ops",
    ]
    modules += [
        "tuner.runners.gpu.torch_peers",
        "tuner.runners.gpu.triton_peer",
        "tuner.runners.race",
        "tuner.runners.race_record",
    ]
    modules += ["tuner.study.warm_start", "tuner.study.known_rows", "tuner.study.plan"]
    if (ROOT / "service" / "__init__.py").exists():
        modules.append("service")
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}:\n"
        "    try:\n        importlib.import_module(m)\n"
        "    except ImportError as e:\n        print('skip', m, e)\n"
        "from tuner.cli.parser import build_parser; build_parser()\n"
        "assert 'cupy' not in sys.modules, 'cupy imported'\nprint('ok')\n"
    )
    proc = _run(code)
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr


def test_help_works_without_a_gpu() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": ""}
    for argv in (["--help"], ["tune", "--help"], ["check", "--help"]):
        proc = subprocess.run(
            [sys.executable, "-m", "tuner", *argv],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        assert "usage: python -m tuner" in proc.stdout


# --- errors a user meets --------------------------------------------------------------------
def _tuner(*argv: str, env: dict | None = None, prelude: str = "", timeout: int = 180):
    """`python -m tuner ARGV` in a fresh process (`prelude` runs first, e.g. to hide a module)."""
    code = f"import runpy, sys\n{prelude}\nrunpy.run_module('tuner', run_name='__main__')\n"
    return subprocess.run(
        [sys.executable, "-c", code, *argv],
        cwd=ROOT,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
            **(env or {}),
        },
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _one_line_usage_error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-3000:]
    return lines[0]


def test_tune_without_cupy_says_what_to_install_in_one_line(tmp_path: Path) -> None:
    proc = _tuner(
        *["--shape", SMALL, "--dtype", "bf16", "--results", str(tmp_path), "--no-progress"],
        prelude="sys.modules['cupy'] = None  # as on a host without the cuda12/cuda13 extra",
    )
    line = _one_line_usage_error(proc)
    assert "CuPy is not installed" in line
    assert "pip install 'repkv-tune[cuda12]'" in line and "[cuda13]" in line and "--replay DIR" in line


def _no_driver_cupy(directory: Path) -> Path:
    """A `cupy` package that imports, but whose CUDA runtime finds no usable driver."""
    package = directory / "cupy"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        "__version__ = '13.4.0'\n"
        "class CUDARuntimeError(RuntimeError):\n    pass\n"
        "def _count():\n"
        "    raise CUDARuntimeError('cudaErrorInsufficientDriver: CUDA driver version is insufficient "
        "for CUDA runtime version')\n"
        "class _runtime:\n    CUDARuntimeError = CUDARuntimeError\n"
        "    getDeviceCount = staticmethod(_count)\n"
        "class cuda:\n    runtime = _runtime\n"
    )
    return directory


def test_tune_with_cupy_but_no_driver_names_the_cause_and_the_fix(tmp_path: Path) -> None:
    fake = _no_driver_cupy(tmp_path / "site")
    proc = _tuner(
        *["--shape", SMALL, "--dtype", "bf16", "--results", str(tmp_path / "r"), "--no-progress"],
        env={"PYTHONPATH": f"{fake}{os.pathsep}{ROOT}"},
    )
    line = _one_line_usage_error(proc)
    assert "cudaErrorInsufficientDriver" in line and "install an NVIDIA driver" in line
    assert "[cuda12]" in line and "--replay DIR" in line
    assert not (tmp_path / "r").exists()  # nothing written


def test_tune_with_the_real_cupy_and_no_gpu_is_one_line(tmp_path: Path) -> None:
    cupy = pytest.importorskip("cupy")
    try:
        if cupy.cuda.runtime.getDeviceCount() > 0:
            pytest.skip("this host has a GPU")
    except Exception:
        pass
    proc = _tuner("--shape", SMALL, "--dtype", "bf16", "--results", str(tmp_path), "--no-progress")
    line = _one_line_usage_error(proc)
    assert "no GPU to tune on (cuda" in line and "[cuda12]" in line


@pytest.mark.parametrize(
    "failure",
    [
        "GPU worker failed to start:\nTraceback (most recent call last):\n  File ...\n"
        "cupy_backends.cuda.api.runtime.CUDARuntimeError: cudaErrorInsufficientDriver: insufficient",
        "start: the worker died (exit code 1)",
    ],
)
def test_a_worker_that_dies_at_start_is_one_line(monkeypatch, tmp_path: Path, capsys, failure: str) -> None:
    import tuner.run.setup
    import tuner.runners.gpu.runner

    class DeadWorker:
        def __init__(self, **_: object) -> None:
            kind = tuner.runners.gpu.runner.WorkerFailed if failure.startswith("GPU") else ConnectionError
            raise kind(failure)

    monkeypatch.setattr(tuner.run.setup, "check_cuda", lambda device=0: None)  # the probe passed
    monkeypatch.setattr(tuner.runners.gpu.runner, "GpuRunner", DeadWorker)
    rc = main(["--shape", SMALL, "--dtype", "bf16", "--results", str(tmp_path), "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert "the GPU worker did not start" in err[0] and failure.splitlines()[-1] in err[0]
    assert "[cuda12]" in err[0]


def _refused(argv: list[str], capsys, runner=None) -> str:
    rc = main(argv, runner=runner)
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("error: "), (argv, rc, err)
    return err[0]


@pytest.mark.parametrize(
    ("extra", "names"),
    [
        (["--seed", "-5"], "argument --seed: takes a whole number from 0 to 4294967295"),
        (["--seed", str(2**32)], "argument --seed"),
        (["--results", "{tmp}/file"], "--results {tmp}/file is a file"),
        (["--results", "{tmp}/file", "--storage", "memory"], "--results {tmp}/file is a file"),
        (["--results", "{tmp}/file/sub", "--storage", "memory"], "is under {tmp}/file, a file"),
        (
            ["--results", "/proc/repkv/results", "--storage", "memory"],
            "--results /proc/repkv/results: cannot",
        ),
        (["--results", "/proc/self", "--storage", "memory"], "--results /proc/self: cannot write there"),
        (["--storage", "redis://localhost:6379/0"], "--storage redis://...: this tuner cannot keep a study"),
        (["--storage", "http://localhost:8080/"], "--storage http://...: this tuner cannot keep a study"),
        (["--storage", "journal:{tmp}/file/optuna.journal"], "--storage journal:{tmp}/file/optuna.journal: "),
        (["--timeout", "0"], "argument --timeout: takes seconds above 0"),
        (["--timeout", "-1"], "argument --timeout: takes seconds above 0"),
        (["--trial-timeout", "0"], "argument --trial-timeout"),
        (["--hold-us", "-1"], "argument --hold-us: takes microseconds from 0"),
        (["--hold-us", "inf"], "argument --hold-us: takes microseconds from 0"),
        (["--heartbeat", "nan"], "argument --heartbeat: takes seconds from 1 to 3600, not 'nan'"),
        (["--heartbeat", "inf"], "argument --heartbeat: takes seconds from 1 to 3600, not 'inf'"),
        (["--heartbeat", "0.5"], "argument --heartbeat: takes seconds from 1 to 3600, not 0.5"),
        (["--replay-delay", "inf"], "argument --replay-delay: takes seconds from 0 to 3600, not 'inf'"),
        (["--replay-delay", "nan"], "argument --replay-delay: takes seconds from 0 to 3600, not 'nan'"),
        (["--replay-delay", "-1"], "argument --replay-delay: takes seconds from 0 to 3600, not -1"),
        (["--trial-timeout", "inf"], "argument --trial-timeout: takes seconds above 0, at most 3600"),
        (["--timeout=-inf"], "argument --timeout: takes seconds above 0, not '-inf'"),
        (["--trials", "0"], "argument --trials"),
        (["--device", "-1"], "argument --device"),
        (["--results", ""], "argument --results: needs a directory, not an empty string"),
        (["--storage", ""], "argument --storage"),
        (["--shape", "B=8,B=9"], "--shape: B is given twice in shape 'B=8,B=9'"),
        (["--shape", f"{SMALL},B=9"], "lacks T, NH, NH_KV, HD"),
    ],
)
def test_a_bad_tune_argument_is_one_line_before_anything_is_measured(
    tmp_path: Path, monkeypatch, capsys, extra: list[str], names: str
) -> None:
    (tmp_path / "file").write_text("not a directory")
    monkeypatch.chdir(tmp_path)  # an empty --results would have meant here
    runner = F.RecordingRunner()
    extra = [a.format(tmp=tmp_path) for a in extra]
    argv = ["--shape", SMALL, "--dtype", "bf16", "--no-progress", *extra]
    if "--results" not in extra:
        argv += ["--results", str(tmp_path / "out")]
    line = _refused(argv, capsys, runner)
    assert names.format(tmp=tmp_path) in line
    assert runner.calls == []  # refused before the first measurement
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]  # and nothing written


def test_an_unreachable_postgresql_is_one_line_after_one_short_attempt(capsys, tmp_path: Path) -> None:
    import socket
    import time

    with socket.socket() as s:  # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    runner = F.RecordingRunner()
    start = time.monotonic()
    argv = ["--shape", SMALL, "--results", str(tmp_path), "--no-progress"]
    line = _refused([*argv, "--storage", f"postgresql://tuner:pw@127.0.0.1:{port}/optuna"], capsys, runner)
    assert time.monotonic() - start < 15 and runner.calls == []
    assert line.startswith("error: --storage postgresql://tuner:***@127.0.0.1:") and ":pw@" not in line


@pytest.mark.parametrize(
    ("extra", "names"),
    [
        (["--tolerance", "-1"], "argument --tolerance: takes a fraction of at least 0"),
        (["--jobs", "0"], "argument --jobs: takes a whole number of at least 1"),
        (["--seeds", "0"], "argument --seeds"),
        (["--max-trials", "-3"], "argument --max-trials"),
        (["--target", "0"], "argument --target"),
        (["--target", "inf"], "argument --target: takes a number above 0, not 'inf'"),
        (["--tolerance", "nan"], "argument --tolerance: takes a fraction of at least 0"),
    ],
)
def test_a_bad_replay_eval_argument_is_one_line(
    recording: Path, capsys, extra: list[str], names: str
) -> None:
    cheap = ["--seeds", "1", "--max-trials", "5", "--samplers", "random"]  # were the value taken
    assert names in _refused(["replay-eval", str(recording), *cheap, *extra], capsys)


def test_an_empty_directory_argument_is_refused_everywhere(capsys) -> None:
    for argv in (["best", "--results", ""], ["replay-eval", ""], ["--replay", "", "--shape", SMALL]):
        assert "not an empty string" in _refused(argv, capsys)


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


def test_replay_eval_shows_a_progress_bar_on_a_terminal_only(recording: Path) -> None:
    import fcntl
    import pty
    import struct
    import termios

    argv = ["replay-eval", str(recording), "--seeds", "2", "--max-trials", "30", "--samplers", "random"]
    primary, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # a terminal's size
    try:
        code = "import runpy; runpy.run_module('tuner', run_name='__main__')"
        proc = subprocess.Popen(
            [sys.executable, "-c", code, *argv],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.DEVNULL,
            stderr=secondary,
        )
        os.close(secondary)
        shown = b""
        while True:  # read as it runs: a full terminal buffer would block the child
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # the child closed its end
                break
            if not chunk:
                break
            shown += chunk
        proc.wait(timeout=180)
    finally:
        os.close(primary)
    assert proc.returncode == 0
    assert b"replay-eval: 100%" in shown and b"2/2" in shown
    piped = _tuner(*argv)  # standard error is a pipe: no bar, lines instead
    assert piped.returncode == 0 and "\r" not in piped.stderr
    assert "replay-eval: 2/2 runs (100%)" in piped.stderr


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


# --- best --format ----------------------------------------------------------------------------
def test_best_writes_json_and_csv(recording: Path, capsys) -> None:
    import io
    import json

    import pandas as pd

    from tuner.cli.report import WINNER_COLUMNS

    assert main(["best", "--results", str(recording), "--format", "json"]) == 0
    winners = json.loads(capsys.readouterr().out)
    assert len(winners) == 1 and list(winners[0]) == list(WINNER_COLUMNS)
    assert winners[0]["gpu"] == "h200" and winners[0]["shape"] == SMALL and winners[0]["time_ms"] > 0
    assert main(["best", "--results", str(recording), "--format", "csv"]) == 0
    table = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert list(table.columns) == list(WINNER_COLUMNS) and table["config"][0] == winners[0]["config"]
    assert main(["best", "--results", str(recording), "--format", "table"]) == 0
    assert "Winners" in capsys.readouterr().out
    assert "argument --format" in _refused(["best", "--results", str(recording), "--format", "xml"], capsys)


def test_best_json_of_nothing_is_an_empty_list(tmp_path: Path, capsys) -> None:
    import json

    assert main(["best", "--results", str(tmp_path), "--format", "json"]) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out) == [] and "no trial rows" in captured.err


def test_l2_reaches_the_request_defaults_to_cold_and_refuses_other_states(capsys) -> None:
    from tuner.cli.parser import build_parser, tune_request

    assert tune_request(build_parser().parse_args(["tune", "--l2", "fed"])).l2 == "fed"
    assert tune_request(build_parser().parse_args(["tune"])).l2 == "cold"
    assert main(["tune", "--l2", "warm", "--shape", SMALL]) == 2
    assert "--l2: invalid choice: 'warm' (choose from 'cold', 'fed')" in capsys.readouterr().err


def write_split_cold_vec_fed(directory: Path) -> None:
    """One h200 group: split fastest cold, vec timed fed alone (synthetic rows)."""
    from results.store import write_table

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from trial_rows import S1, SPLIT16, VEC16, trial

    rows = [
        trial("h200", S1, "bf16", "split", SPLIT16, 0.08, number=0),
        trial("h200", S1, "bf16", "vec", VEC16, 0.05, number=1, l2="fed"),
    ]
    write_table(rows, directory / "h200", "run")


def test_export_l2_fed_writes_the_winners_tuned_fed(tmp_path: Path, capsys) -> None:
    import json

    write_split_cold_vec_fed(tmp_path)
    families = {}
    for state in ("cold", "fed"):
        assert main(["export", "--format", "json", "--results", str(tmp_path), "--l2", state]) == 0
        (row,) = json.loads(capsys.readouterr().out)["ops"]["repkv_backward"]["rows"]
        families[state] = (row["family"], row["l2"])
    assert families == {"cold": ("split", "cold"), "fed": ("vec", "fed")}
    assert main(["export", "--results", str(tmp_path), "--l2", "fed"]) == 0
    assert (
        "// Tuned with dout just written (python -m tuner --l2 fed): 1 of 1 rows." in capsys.readouterr().out
    )


def test_best_l2_fed_prints_the_winners_tuned_fed(tmp_path: Path, capsys) -> None:
    write_split_cold_vec_fed(tmp_path)
    assert main(["best", "--results", str(tmp_path), "--format", "csv", "--l2", "fed"]) == 0
    fed = capsys.readouterr().out
    assert main(["best", "--results", str(tmp_path), "--format", "csv"]) == 0
    cold = capsys.readouterr().out
    assert "vec[" in fed and "split[" not in fed and "split[" in cold and "vec[" not in cold


@pytest.mark.parametrize("case", ["a directory that does not exist", "in use by another process"])
def test_a_sqlite_storage_that_cannot_serve_is_refused_before_the_gpu_starts(
    monkeypatch, tmp_path: Path, capsys, case: str
) -> None:
    import fcntl

    import tuner.run.pipeline

    started: list[tuple] = []

    def gpu_runner(*args, **kwargs):
        started.append(args)
        return F.synthetic_runner()

    monkeypatch.setattr(tuner.run.pipeline, "gpu_runner", gpu_runner)
    db = tmp_path / "typo" / "dir" / "optuna.db" if case.startswith("a directory") else tmp_path / "optuna.db"
    held = None
    if case.startswith("in use"):
        held = os.open(f"{db}.lock", os.O_RDWR | os.O_CREAT)
        fcntl.flock(held, fcntl.LOCK_EX)
    try:
        argv = ["--shape", SMALL, "--dtype", "bf16", "--trials", "2", "--results", str(tmp_path / "out")]
        line = _refused([*argv, "--no-progress", "--storage", f"sqlite:///{db}"], capsys)
    finally:
        if held is not None:
            os.close(held)
    assert line.startswith(f"error: --storage sqlite:///{tmp_path}")
    assert ("does not exist" if case.startswith("a directory") else "in use by") in line
    assert started == []  # refused before the GPU worker was started
    assert not (tmp_path / "typo").exists() and not db.exists()


def test_best_and_export_read_the_results_directory_alone_with_no_bundled(
    monkeypatch, tmp_path: Path, capsys
) -> None:
    import json

    mine = tmp_path / "mine"
    F.write_recording(mine / "h200", [F.SMALL], ["bf16"])
    monkeypatch.setenv("REPKV_RESULTS_DIR", str(mine))
    assert main(["best", "--format", "json"]) == 0
    both = json.loads(capsys.readouterr().out)
    assert main(["best", "--format", "json", "--no-bundled"]) == 0
    alone = json.loads(capsys.readouterr().out)
    assert {r["shape"] for r in alone} == {SMALL} and len(both) > len(alone)
    exported = tmp_path / "winners.json"
    argv = ["export", "--format", "json", "--gpu", "h200", "--dtype", "bf16", "-o", str(exported)]
    assert main([*argv, "--no-bundled"]) == 0
    assert f"1 tuned shapes of h200 written to {exported}" in capsys.readouterr().err
    assert main(argv) == 0
    assert "1 tuned shapes" not in capsys.readouterr().err  # with the bundled shapes: more
