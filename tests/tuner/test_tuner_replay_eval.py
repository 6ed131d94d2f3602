from __future__ import annotations

from pathlib import Path

import optuna
import pytest
import tuner_fakes as F

from results.store import write_table
from tuner import replay_eval
from tuner.replay import ReplayRunner

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
    from tuner.cli import main

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
