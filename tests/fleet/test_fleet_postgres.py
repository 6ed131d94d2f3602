"""Two tuner processes share one study through PostgreSQL and write one results dataset."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tuner"))
import tuner_fakes as F

from results.store import load_results

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.postgres
SMALL = "B=1,T=256,NH=14,NH_KV=2,HD=64"


def _workers(
    recording: Path, out: Path, url: str, study: str, extra: list[str]
) -> list[subprocess.CompletedProcess]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "tuner", "--replay", str(recording), "--shape", SMALL, "--dtype", "bf16"]
    argv += ["--storage", url, "--study", study, "--results", str(out), "--no-progress", *extra]
    procs = [
        subprocess.Popen(
            [*argv, "--seed", str(seed)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for seed in (1, 2)
    ]
    done = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=300)
        done.append(subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr))
    return done


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("recording")
    F.write_recording(directory, [F.SMALL], ["bf16"])
    return directory


def test_two_workers_share_a_tpe_study_and_measure_nothing_twice(
    recording: Path, tmp_path: Path, postgres_url: str
) -> None:
    out = tmp_path / "out"
    procs = _workers(recording, out, postgres_url, f"fleet-{uuid.uuid4().hex[:8]}", ["--trials", "30"])
    for p in procs:
        assert p.returncode == 0, p.stderr[-3000:]
    files = sorted((out / "h200").glob("*.parquet"))
    assert len(files) == 2  # one file per worker
    frame, report = load_results(out)
    assert not report.skipped
    assert frame["config_key"].is_unique, frame["config_key"].value_counts().head()
    assert frame["run_id"].nunique() == 2
    assert frame["config_key"].nunique() >= 30


def test_two_workers_split_a_grid_between_them(recording: Path, tmp_path: Path, postgres_url: str) -> None:
    out = tmp_path / "out"
    procs = _workers(recording, out, postgres_url, f"grid-{uuid.uuid4().hex[:8]}", ["--sampler", "grid"])
    for p in procs:
        assert p.returncode == 0, p.stderr[-3000:]
    frame, _ = load_results(out)
    recorded, _ = load_results(recording)
    assert frame["config_key"].is_unique
    assert set(frame["config_key"]) == set(recorded["config_key"])  # the union has every trial
    assert frame["run_id"].nunique() == 2
