"""The tuner's command line without a GPU: usage errors and failures each said in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
import tuner_fakes as F
from cli_helpers import ROOT, SMALL, _refused, _tuner

from tuner.cli.main import main

optuna.logging.set_verbosity(optuna.logging.WARNING)


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


@pytest.mark.parametrize("command", ["tune", "variants"])
def test_a_shape_name_given_twice_is_a_usage_error_naming_it(capsys, tmp_path: Path, command: str) -> None:
    text = "B=8,T=1024,NH=32,NH_KV=8,HD=128,B=9"
    argv = [command, "--shape", text]
    if command == "tune":
        argv += ["--results", str(tmp_path), "--storage", "memory", "--no-progress"]
    line = _refused(argv, capsys, runner=F.synthetic_runner())
    assert line.startswith(f"error: --shape: B is given twice in shape {text!r}"), line
    assert not any(tmp_path.iterdir())  # nothing measured


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--batch", "-1"], "error: --batch: B must be >= 1, got -1"),
        (["--seq", "0"], "error: --seq: T must be >= 1, got 0"),
    ],
)
def test_a_model_shape_refused_names_the_flag_that_gave_it(capsys, flags: list[str], expected: str) -> None:
    # it said "B must be >= 1, got -1", naming neither --batch nor --seq
    line = _refused(["--model", "llama3-8b", *flags, "--replay", "bundled", "--no-progress"], capsys)
    assert line == expected


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


@pytest.mark.parametrize(
    ("argv0", "prog"),
    [
        ("/venv/bin/repkv-tune", "repkv-tune"),
        (str(ROOT / "tuner" / "__main__.py"), "python -m tuner"),  # python -m tuner
        ("-c", "python -m tuner"),
    ],
)
def test_usage_and_error_lines_name_the_command_as_it_was_started(
    monkeypatch, capsys, argv0: str, prog: str
) -> None:
    import tuner.cli.extra

    monkeypatch.setattr(sys, "argv", [argv0])
    assert main(["--help"]) == 0
    assert capsys.readouterr().out.startswith(f"usage: {prog} ")
    assert main(["best", "--format", "xml"]) == 2
    assert capsys.readouterr().err.endswith(f"(see {prog} best --help)\n")
    monkeypatch.setattr(tuner.cli.extra, "missing_modules", lambda: ["optuna"])
    assert main(["--replay", "bundled"]) == 2
    assert capsys.readouterr().err.startswith(f"error: {prog} tune needs the tuner's dependencies")


def test_the_installed_script_names_itself() -> None:
    script = Path(sys.executable).with_name("repkv-tune")
    if not script.exists():
        pytest.skip("repkv-tune is not installed beside this interpreter")
    proc = subprocess.run([script, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.startswith("usage: repkv-tune "), proc.stderr
    proc = subprocess.run(
        [script, "best", "--format", "xml"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2 and proc.stderr.strip().endswith("(see repkv-tune best --help)"), proc.stderr


# --- errors a user meets --------------------------------------------------------------------
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


def test_an_empty_directory_argument_is_refused_everywhere(capsys) -> None:
    for argv in (["best", "--results", ""], ["replay-eval", ""], ["--replay", "", "--shape", SMALL]):
        assert "not an empty string" in _refused(argv, capsys)


def test_an_empty_file_argument_is_refused(capsys) -> None:
    # before: export -o '' said "-o . is a directory", and check --save-reports '' saved nothing
    for argv in (["export", "-o", ""], ["check", "--save-reports", " "]):
        assert "needs a file, not an empty string" in _refused(argv, capsys)


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


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("a_dir", "is a directory: name the file to write"),
        ("a_file/reports.parquet", "a_file is a file: name a file in a directory you can write"),
        ("junk.parquet", "is not a report file (Could not open Parquet input source"),
    ],
)
def test_check_refuses_a_reports_file_it_cannot_write_before_compiling(
    name: str, said: str, tmp_path: Path, monkeypatch, capsys
) -> None:
    """check --save-reports compiled every kernel, then ended in a traceback (FileExistsError for a
    path under a file, ArrowInvalid for a directory or a file that is not a report file)."""
    import variants.nvrtc

    (tmp_path / "a_dir").mkdir()
    (tmp_path / "a_file").write_text("not a directory")
    (tmp_path / "junk.parquet").write_text("not parquet")
    before = sorted(p.name for p in tmp_path.iterdir())

    def no_compiling(*args, **kwargs):
        raise AssertionError("compiled before the reports file was checked")

    monkeypatch.setattr(variants.nvrtc, "compile_all", no_compiling)
    argv = ["check", "--shape", SMALL, "--family", "naive", "--dtype", "bf16", "--arch", "sm_90"]
    assert main([*argv, "--save-reports", str(tmp_path / name), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: --save-reports {tmp_path / name}"), err
    assert said in err[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == before and not list((tmp_path / "a_dir").iterdir())


def test_export_to_a_path_under_a_file_says_so_before_reading_results(tmp_path: Path, capsys) -> None:
    """-o under a file failed after the export was built, with 'cannot write X: File exists'."""
    (tmp_path / "llmc").write_text("a file, not a directory")
    out = tmp_path / "llmc" / "repkv_tuned.cuh"
    assert main(["export", "--gpu", "h200", "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    expected = f"error: -o {out}: {tmp_path / 'llmc'} is a file: name a file in a directory you can write"
    assert err == [expected], err


@pytest.mark.parametrize("arch", ["sm_999", "sm_70"])  # sm_70: dropped in CUDA 13
def test_check_for_a_target_nvrtc_does_not_know_is_one_line_before_compiling(
    arch: str, monkeypatch, capsys
) -> None:
    """check --arch sm_999 compiled 60,024 kernels, each 'FAILED ... invalid value for
    --gpu-architecture', and kept the failures in the report cache."""
    nvrtc = pytest.importorskip("variants.nvrtc")
    try:
        supported = nvrtc.supported_archs()
    except nvrtc.NvrtcUnavailable as exc:  # pragma: no cover - CI installs the nvrtc extra
        pytest.skip(str(exc))
    if int(arch[3:]) in supported:  # pragma: no cover - an NVRTC older than CUDA 13
        pytest.skip(f"this NVRTC compiles for {arch}")

    def no_compiling(*args, **kwargs):
        raise AssertionError("compiled for a target NVRTC does not know")

    monkeypatch.setattr(nvrtc, "compile_all", no_compiling)
    argv = ["check", "--shape", SMALL, "--family", "naive", "--arch", f"sm_90,{arch}", "--no-progress"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    said = f"error: NVRTC {nvrtc.nvrtc_version()} does not compile for {arch}"
    assert len(err) == 1 and err[0].startswith(said), err
    assert "sm_90" in err[0]


def test_check_without_nvrtc_says_so_on_standard_error(monkeypatch, capsys) -> None:
    """The 'offline compilation needs cuda-bindings and NVRTC' line went to standard output."""
    import variants.nvrtc

    message = "offline compilation needs NVRTC: pip install 'repkv-tune[nvrtc]'"

    def unavailable() -> str:
        raise variants.nvrtc.NvrtcUnavailable(message)

    monkeypatch.setattr(variants.nvrtc, "nvrtc_version", unavailable)
    assert main(["check", "--shape", SMALL, "--family", "naive", "--arch", "sm_90", "--no-progress"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip().splitlines() == [f"error: {message}"]


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["best", "--dtype", "bf16"], "best"),
        (["--frobnicate"], "tune"),
        (["merge", "a", "-o", "b", "--zz"], "merge"),
    ],
)
def test_an_unknown_flag_points_at_its_subcommands_help(argv: list[str], command: str, capsys) -> None:
    """It pointed at `python -m tuner --help`, which lists the subcommands and none of their flags."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: unrecognized arguments: "), err
    assert err[0].endswith(f"(see python -m tuner {command} --help)"), err


@pytest.mark.parametrize("kind", ["a file", "a directory"])
def test_a_results_dir_whose_journal_name_holds_something_else_is_refused(
    kind: str, tmp_path: Path, capsys
) -> None:
    """Without --storage a run keeps its study in <results>/optuna.journal; something else there
    ended the run in a traceback (JSONDecodeError, IsADirectoryError), while --storage
    journal:FILE naming the same file was refused in one line."""
    F.write_recording(tmp_path / "rec", [F.SMALL], ["bf16"])
    results = tmp_path / "results"
    results.mkdir()
    journal = results / "optuna.journal"
    if kind == "a file":
        journal.write_text("notes, not a journal\n")
    else:
        journal.mkdir()
    argv = ["--replay", str(tmp_path / "rec"), "--shape", SMALL, "--dtype", "bf16", "--trials", "2"]
    assert main([*argv, "--results", str(results), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {journal.resolve()} is not an Optuna journal"), err
    assert "give --storage journal:FILE" in err[0], err
    assert sorted(p.name for p in results.iterdir()) == ["optuna.journal"]
    assert kind == "a directory" or journal.read_text() == "notes, not a journal\n"


def test_save_reports_killed_mid_write_leaves_the_earlier_file(tmp_path: Path, monkeypatch) -> None:
    """check --save-reports wrote the report file in place: a run killed mid-write left a torn
    parquet file that no later check could read."""
    import pyarrow.parquet as pq

    from tuner.cli.check import save_reports
    from variants.compile_cache import ReportCache, default_cache

    cache = default_cache()
    assert cache is not None
    path = tmp_path / "reports.parquet"
    pq.write_table(ReportCache.table({"earlier": {"ok": True}}), path)
    before = path.read_bytes()

    def torn(table, where, **options) -> None:
        with open(where, "wb") as out:
            out.write(b"PAR1 torn")
        raise KeyboardInterrupt

    monkeypatch.setattr(pq, "write_table", torn)
    with pytest.raises(KeyboardInterrupt):
        save_reports([], "sm_90", path)
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["reports.parquet"]
    assert ReportCache.read_file(path) == {"earlier": {"ok": True}}


@pytest.mark.parametrize("command", [["best", "--gpu", "h200"], ["export", "--gpu", "h200"]])
def test_a_results_dir_variable_naming_a_file_is_one_line(
    command: list[str], tmp_path: Path, monkeypatch, capsys
) -> None:
    """best read the file as a results directory and titled its table 'Winners in <the file>'."""
    a_file = tmp_path / "readme.txt"
    a_file.write_text("not a directory")
    monkeypatch.setenv("REPKV_RESULTS_DIR", str(a_file))
    argv = [*command, "-o", str(tmp_path / "out.cuh")] if command[0] == "export" else command
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip().splitlines() == [f"error: REPKV_RESULTS_DIR: {a_file} is not a directory"]
    assert not (tmp_path / "out.cuh").exists()
