from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
import tuner_fakes as F

from results.store import load_results
from tuner.cli import main
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
    rows = [r for r in F.recording_rows([F.SMALL], ["bf16"]) if r["family"] in ("naive", "gather")]
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
    assert "split[" in out or "vec[" in out


def _run(code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_no_package_imports_cupy() -> None:
    modules = ["variants", "results", "results.store", "results.best", "tuner", "tuner.cli", "tuner.study"]
    modules += ["tuner.replay", "tuner.replay_eval", "tuner.report", "tuner.storage", "tuner.check"]
    modules += ["tuner.gpu", "tuner.gpu.runner", "tuner.gpu.worker", "tuner.gpu.torch_op"]
    modules += ["tuner.gpu.torch_peers", "tuner.gpu.triton_peer"]
    if (ROOT / "service" / "__init__.py").exists():
        modules.append("service")
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}:\n"
        "    try:\n        importlib.import_module(m)\n"
        "    except ImportError as e:\n        print('skip', m, e)\n"
        "from tuner.cli import build_parser; build_parser()\n"
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
