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
