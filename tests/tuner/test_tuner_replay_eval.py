from __future__ import annotations

from pathlib import Path

import optuna
import pytest
import tuner_fakes as F

from results.store import write_table
from tuner.runners.replay import ReplayRunner
from tuner.study import replay_eval

optuna.logging.set_verbosity(optuna.logging.WARNING)
SMALL = "B=1,T=256,NH=14,NH_KV=2,HD=64"


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("recording")
    F.write_recording(directory, [F.SMALL], ["bf16"])
    return directory


def test_replay_eval_counts_trials_to_the_optimum(recording: Path) -> None:
    frame = replay_eval.load(recording)
    results = replay_eval.evaluate(frame, samplers=("tpe", "random"), seeds=3, max_trials=60)
    assert len(results) == 6
    for r in results:
        assert 1 <= r.trials <= 60 or r.trials == float("inf")
    table = replay_eval.summary(results)
    assert set(table["sampler"]) == {"tpe", "random"}
    assert set(replay_eval.overall_medians(results)) == {"tpe", "random"}


def test_replay_eval_judges_only_exhaustive_recordings(tmp_path: Path) -> None:
    full = F.recording_rows([F.SMALL], ["bf16"])
    partial = F.recording_rows([F.SHAPE], ["bf16"])[::2]  # every family, half its configurations
    write_table(full + partial, tmp_path / "h200", "mixed")
    runner = ReplayRunner(replay_eval.load(tmp_path), "h200")
    assert len(runner.groups()) == 2
    assert [(s.key, d) for s, d in replay_eval.exhaustive_groups(runner)] == [(SMALL, "bf16")]


def test_trials_to_target() -> None:
    assert replay_eval.trials_to_target([("a", 3.0), ("b", 1.5), ("c", 1.0)], 1.5) == 2
    assert replay_eval.trials_to_target([("a", 3.0)], 1.0) == float("inf")


def test_a_grid_sampled_again_by_one_family_is_judged_over_its_complete_families(tmp_path: Path) -> None:
    """A `--family tile` run on a recorded grid adds some of tile's configurations: the group
    stays exhaustive for the families the grid recorded, and the search and its optimum keep to
    those. A group where only llm.c's six block sizes are complete is no test of a sampler."""
    rows = F.recording_rows([F.SMALL, F.SHAPE], ["bf16"])
    grid = [r for r in rows if r["B"] == F.SMALL.B and r["family"] != "tile"]
    tile = [r for r in rows if r["B"] == F.SMALL.B and r["family"] == "tile"]
    sampled = [{**r, "time_ms": r["time_ms"] / 10} for r in tile[:5]]  # faster, but not searched
    naive_only = [r for r in rows if r["B"] == F.SHAPE.B and r["family"] in ("naive", "vec")][:7]
    write_table(grid + sampled + naive_only, tmp_path / "h200", "mixed")
    runner = ReplayRunner(replay_eval.load(tmp_path), "h200")
    assert [(s.key, d) for s, d in replay_eval.exhaustive_groups(runner)] == [(SMALL, "bf16")]
    families = replay_eval.complete_families(runner, F.SMALL, "bf16")
    assert "tile" not in families and "split" in families
    best = min(r["time_ms"] / r["copy_ms"] for r in grid if r["status"] == "ok")
    assert replay_eval.optimum(runner, F.SMALL, "bf16", families) == pytest.approx(best)
    (result,) = replay_eval.evaluate(replay_eval.load(tmp_path), samplers=("random",), seeds=1)
    assert result.trials < float("inf")


def test_replay_eval_says_so_when_nothing_was_recorded_exhaustively(tmp_path: Path, capsys) -> None:
    from tuner.cli.main import main

    write_table(F.recording_rows([F.SMALL], ["bf16"])[::3], tmp_path / "h200", "sampled")
    assert main(["replay-eval", str(tmp_path), "--seeds", "1", "--samplers", "random"]) == 2
    err = capsys.readouterr().err
    assert "holds every configuration of any family" in err and err.count("\n") == 1


def test_the_warm_start_of_a_search_of_some_families_comes_from_those_families() -> None:
    import pandas as pd

    from results.index import build_index

    rows = [r for r in F.recording_rows([F.SHAPE], ["bf16"]) if r["family"] in ("tile", "split")]
    group = build_index(pd.DataFrame(rows)).groups_of("h200")[0]
    assert {c.family.name for c in group.candidates} == {"tile", "split"}
    (kept,) = replay_eval.of_families([group], {"split": None})
    assert {c.family.name for c in kept.candidates} == {"split"}
    assert [c.config_key for c in kept.candidates] == [
        c.config_key for c in group.candidates if c.family.name == "split"
    ]
    assert replay_eval.of_families([group], {"naive": None}) == []


def test_replay_eval_logs_progress_lines_where_no_bar_can_be_drawn(recording: Path, capsys) -> None:
    """Standard error is not a terminal here (a log, CI, nohup): lines say how far the runs
    are, where a run of minutes used to be silent until its table."""
    from tuner.cli.main import main

    argv = ["replay-eval", str(recording), "--seeds", "2", "--max-trials", "30", "--samplers", "random,tpe"]
    assert main([*argv, "--jobs", "1"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "replay-eval: 4 runs" and err[-1].startswith("replay-eval: 4/4 runs (100%) in ")
    assert main([*argv, "--jobs", "1", "--no-progress"]) == 0
    assert capsys.readouterr().err == ""


def test_a_sampler_named_twice_is_run_and_reported_once(recording: Path, capsys) -> None:
    # --samplers random,random ran every seed twice: its table said "seeds 2" for --seeds 1
    from tuner.cli.main import main

    argv = [
        "replay-eval",
        str(recording),
        "--seeds",
        "1",
        "--max-trials",
        "30",
        "--samplers",
        "random,random",
    ]
    assert main([*argv, "--jobs", "1"]) == 0
    captured = capsys.readouterr()
    assert captured.err.splitlines()[0] == "replay-eval: 1 runs"
    lines = captured.out.splitlines()
    assert lines[2].split()[-1] == "1" and len(lines) == 5  # title, header, one row, median, verdict
    assert sum(line.startswith("random: median") for line in lines) == 1


def test_progress_lines_come_at_most_every_interval_and_at_the_end() -> None:
    import io

    from tuner.cli.replay_eval import ProgressLines

    now = [0.0]
    out = io.StringIO()
    lines = ProgressLines(out, every_s=10.0, clock=lambda: now[0])
    lines(0, 100)
    for done in range(1, 101):
        now[0] = done * 0.5  # a run each half second: 50 s in all
        lines(done, 100)
    shown = out.getvalue().splitlines()
    assert shown[0] == "replay-eval: 100 runs"
    assert shown[1] == "replay-eval: 20/100 runs (20%) in 10 s, about 40 s left"
    assert shown[-1] == "replay-eval: 100/100 runs (100%) in 50 s" and len(shown) == 6


def test_replay_eval_names_the_bundled_recording_and_says_where_it_lives(tmp_path: Path, capsys) -> None:
    from results.store import bundled_results_dir
    from tuner.cli.main import main
    from tuner.cli.parser import build_parser

    args = build_parser().parse_args(["replay-eval", "bundled"])
    assert args.recording == bundled_results_dir()
    assert main(["replay-eval", str(tmp_path), "--seeds", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"no trial rows under {tmp_path}" in err
    where = f"(in {bundled_results_dir()})"
    assert f"replay-eval bundled, the measurements shipped with the package {where}" in err


def test_replay_eval_of_the_bundled_recording_takes_seconds_a_seed() -> None:
    """The README's example (`replay-eval bundled --gpu h200 --seeds 20`) took about two
    hours on a 2-core machine, 200-370 s a seed: each task indexed the recording again, and
    TPE's repeats in one-family grids went unchecked. Two seeds now take a few seconds."""
    import time

    from results.store import bundled_results_dir

    started = time.monotonic()
    results = replay_eval.evaluate(replay_eval.load(bundled_results_dir()), "h200", seeds=2, jobs=2, ahead=8)
    took = time.monotonic() - started
    assert len({(r.shape, r.dtype) for r in results}) >= 5 and len(results) % 2 == 0
    assert took < 60.0, f"two seeds took {took:.0f} s"
