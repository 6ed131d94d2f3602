"""The tuner's commands over results without a GPU: --replay, replay-eval, best and export."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
import tuner_fakes as F
from cli_helpers import ROOT, SMALL, _refused, _tuner

from results.store import load_results
from tuner.cli.main import main

optuna.logging.set_verbosity(optuna.logging.WARNING)


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


def test_best_prints_the_winners_of_a_results_dir(recording: Path, capsys) -> None:
    assert main(["best", "--results", str(recording)]) == 0
    out = capsys.readouterr().out
    assert "Winners" in out and "h200" in out
    assert any(f"{family}[" in out for family in ("split", "tile", "vec"))


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


def test_best_table_of_nothing_says_so_on_stderr_alone(tmp_path: Path, capsys) -> None:
    # the message went to stdout in table form: `best > winners.txt` filed it as the table
    assert main(["best", "--results", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.strip() == f"no trial rows under {tmp_path}"


def test_best_of_a_gpu_the_results_lack_is_a_usage_error(recording: Path, capsys) -> None:
    for fmt in ("table", "json", "csv"):
        line = _refused(["best", "--results", str(recording), "--gpu", "h100", "--format", fmt], capsys)
        assert "no results for GPU 'h100'; the results hold h200" in line
    assert capsys.readouterr().out == ""


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


def test_best_l2_fed_of_results_timed_cold_alone_says_so(tmp_path: Path, capsys) -> None:
    # it printed "no correct measurement to report" (exit 0), and csv a bare header (exit 0)
    from results.store import write_table

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from trial_rows import S1, SPLIT16, trial

    write_table([trial("h200", S1, "bf16", "split", SPLIT16, 0.08, number=0)], tmp_path / "h200", "run")
    expected = f"no winners timed with L2 fed under {tmp_path} (python -m tuner --l2 fed tunes them"
    assert main(["best", "--results", str(tmp_path), "--l2", "fed"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith(expected)
    assert main(["best", "--results", str(tmp_path), "--l2", "fed", "--format", "json"]) == 1
    captured = capsys.readouterr()
    assert captured.out.strip() == "[]" and captured.err.startswith(expected)
    assert main(["best", "--results", str(tmp_path), "--format", "csv"]) == 0
    assert "split[" in capsys.readouterr().out


def test_best_of_results_holding_other_ops_alone_names_them(tmp_path: Path, capsys) -> None:
    # "no trial rows under DIR" where DIR held rows, of rope_repkv_forward
    from results.store import write_table

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from trial_rows import S1, trial

    row = trial("h200", S1, "bf16", "naive", {"block": 128}, 0.5, number=0, op="rope_repkv_forward")
    write_table([row], tmp_path / "h200", "run")
    assert main(["best", "--results", str(tmp_path)]) == 1
    held = "they hold rope_repkv_forward (--op rope_repkv_forward)"
    assert capsys.readouterr().err.strip() == f"no trial rows of repkv_backward under {tmp_path}; {held}"
    assert main(["best", "--results", str(tmp_path), "--op", "rope_repkv_forward", "--format", "csv"]) == 0
    assert "naive[block=128]" in capsys.readouterr().out


def test_best_of_a_gpu_with_rows_of_other_ops_alone_names_them(tmp_path: Path, capsys) -> None:
    # "no results for GPU 'h100'; the results hold h200" where h100 held rows, of rope_repkv_forward
    from results.store import write_table

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from trial_rows import S1, trial

    write_table([trial("h200", S1, "bf16", "naive", {"block": 128}, 0.5, number=0)], tmp_path / "h200", "a")
    row = trial("h100", S1, "bf16", "naive", {"block": 128}, 0.5, number=0, op="rope_repkv_forward")
    write_table([row], tmp_path / "h100", "b")
    assert main(["best", "--results", str(tmp_path), "--gpu", "h100"]) == 1
    only = "only rows of rope_repkv_forward (--op rope_repkv_forward)"
    expected = f"GPU h100 has no trial rows of repkv_backward under {tmp_path}, {only}"
    assert capsys.readouterr().err.strip() == expected


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


def test_best_and_export_read_a_results_directory_given_alone_and_their_help_says_so(
    tmp_path: Path, capsys
) -> None:
    import json

    mine = tmp_path / "mine"
    F.write_recording(mine / "h200", [F.SMALL], ["bf16"])
    for extra in ([], ["--no-bundled"]):  # the same rows either way: the bundled results are not read
        assert main(["best", "--results", str(mine), "--format", "json", *extra]) == 0
        assert {r["shape"] for r in json.loads(capsys.readouterr().out)} == {SMALL}
    for command in ("best", "export"):
        assert main([command, "--help"]) == 0
        text = " ".join(capsys.readouterr().out.split())
        assert "--results DIR read DIR alone, without the results bundled with the package" in text, text
        assert "(unlike the service's --results-dir, which serves them beside it; " in text, text
        assert "--no-bundled then changes nothing); default: " in text, text


def test_best_and_export_name_each_unreadable_file_once(recording: Path, tmp_path: Path) -> None:
    import shutil

    results = tmp_path / "results"
    shutil.copytree(recording, results)
    (results / "h200").mkdir(exist_ok=True)
    (results / "h200" / "broken.parquet").write_bytes(b"not parquet")
    for argv in (["best"], ["export", "--format", "json"]):
        proc = _tuner(*argv, "--results", str(results))
        assert proc.returncode == 0, proc.stderr
        lines = [line for line in proc.stderr.splitlines() if "broken.parquet" in line]
        assert len(lines) == 1 and lines[0].count("broken.parquet") == 1, proc.stderr
        assert "unreadable parquet" in lines[0]


def test_export_to_a_directory_is_one_line_and_leaves_nothing_beside_it(
    recording: Path, tmp_path: Path, capsys
) -> None:
    """-o naming a directory wrote the whole header to a hidden temporary beside it, then failed
    to rename it over the directory and left the temporary behind."""
    out = tmp_path / "llmc"
    out.mkdir()
    argv = ["export", "--results", str(recording), "--gpu", "h200", "--format", "json", "-o", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0] == f"error: -o {out} is a directory: name the file to write", err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["llmc"] and not list(out.iterdir())


def test_exports_to_one_path_never_share_a_temporary_name(recording: Path, tmp_path: Path, capsys) -> None:
    """The header went through the fixed temporary `.<name>.tmp`: a second export of the same
    path, or anything already at that name, broke the first or was overwritten by it."""
    out = tmp_path / "repkv.cuh"
    (tmp_path / ".repkv.cuh.tmp").mkdir()  # the old fixed name, taken
    argv = ["export", "--results", str(recording), "--gpu", "h200", "-o", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    assert "#pragma once" in out.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".repkv.cuh.tmp", "repkv.cuh"]


def test_export_of_a_directory_without_rows_says_so_not_pick_a_gpu(tmp_path: Path, capsys) -> None:
    """A missing or empty --results was answered 'the results hold GPUs none: pick one with --gpu'."""
    (tmp_path / "empty").mkdir()
    for name, note in (("empty", ""), ("typo", f" ({tmp_path / 'typo'}: no such directory)")):
        assert main(["export", "--results", str(tmp_path / name)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [f"error: no trial rows under {tmp_path / name}{note}"], err


@pytest.mark.parametrize(
    "argv",
    [["best"], ["best", "--gpu", "h200"], ["best", "--format", "json"], ["export", "--gpu", "h200"]],
)
def test_best_and_export_of_a_results_dir_that_does_not_exist_say_so(
    argv: list[str], tmp_path: Path, capsys
) -> None:
    """A mistyped --results was read as an empty store: best printed 'no trial rows under DIR' and
    exited 1, export --gpu said 'the results hold none (in DIR)'; neither said DIR is not there."""
    typo = tmp_path / "typo"
    assert main([*argv, "--results", str(typo)]) == 2
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [
        f"error: no trial rows under {typo} ({typo}: no such directory)"
    ]
    assert captured.out == "" and not typo.exists()


@pytest.mark.parametrize("argv", [["best"], ["best", "--format", "csv"], ["export", "--gpu", "h200"]])
def test_best_and_export_of_a_results_path_that_is_a_file_say_so(
    argv: list[str], tmp_path: Path, capsys
) -> None:
    """A file given as --results (a parquet file, say) was read as an empty store: best printed
    'no trial rows under FILE' and exited 1, export called it 'no such directory'."""
    afile = tmp_path / "rows.parquet"
    afile.write_bytes(b"PAR1")
    assert main([*argv, "--results", str(afile)]) == 2
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [
        f"error: no trial rows under {afile} ({afile}: not a directory)"
    ]
    assert captured.out == ""
