"""A fleet of tuner processes on one study, with real storages: PostgreSQL (a throwaway
server, see conftest.py) and Optuna's journal file. The workers replay a recording with a
delay per trial, as a GPU takes time to measure, so that a kill lands in the middle of one.

For each storage:
- `--devices 0,1,2,3` (four workers, each its own process) share one study with --trials 16:
  exactly 16 configurations are measured, each once, every row is on disk, and the service
  reads the results directory while the workers write it; run again, it measures nothing.
- Four workers, three from the start and one late: one SIGKILLs itself right after writing a
  row (before the study hears of it), one is SIGKILLed by the test in the middle of a trial.
  The first's row stands and is not measured again; the second's configuration is measured
  by another worker once its trial is found dead (Optuna's heartbeat on PostgreSQL, the
  worker's pid on the journal); the late worker joins; the budget still holds exactly.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
import optuna
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tuner"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import tuner_fakes as F
from live_service import running_service

from results.store import load_results
from tuner.study.claims import ATTR_KEY, ATTR_MEASURING, Snapshot
from tuner.study.liveness import WORKER
from tuner.study.storage import make_storage

ROOT = Path(__file__).resolve().parents[2]
SMALL = "B=1,T=256,NH=14,NH_KV=2,HD=64"
FLEET_TRIALS = 16  # four each: every worker measures, and none alone reaches the budget
TIMINGS: list[str] = []  # printed at the end of the module (pytest -s, or the -rA summary)


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("recording")
    F.write_recording(directory, [F.SMALL], ["bf16"])
    return directory


@pytest.fixture(params=["journal", "postgres"])
def storage_for(request) -> Callable[[Path], str]:
    """Storage URL for a test's directory: a journal file in it, or the PostgreSQL server."""
    if request.param == "journal":
        return lambda directory: f"journal:{directory / 'optuna.journal'}"
    url = request.getfixturevalue("postgres_url")
    return lambda directory: url


def _tuner(recording: Path, out: Path, url: str, study: str, *, trials: int, delay: float) -> list[str]:
    return [
        *["--replay", str(recording), "--shape", SMALL, "--dtype", "bf16", "--trials", str(trials)],
        *["--results", str(out), "--storage", url, "--study", study, "--replay-delay", str(delay)],
        # PostgreSQL: Optuna's heartbeat every 2 s, a worker silent for 8 s is taken for dead (a
        # busy 2-core machine can starve a live one for a few seconds); the journal judges the
        # workers of this host by their pids
        *["--heartbeat", "2", "--no-progress"],
    ]


def _start(args: list[str], *, script: list[str] | None = None) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    head = script if script is not None else ["-m", "tuner"]
    return subprocess.Popen(
        [sys.executable, *head, *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _finish(proc: subprocess.Popen, timeout: float = 150) -> tuple[int, str]:
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        pytest.fail(f"a worker did not finish in {timeout} s: {err[-3000:]}")
    return proc.returncode, err


_storage = functools.cache(make_storage)


def _study(url: str, name: str) -> optuna.Study:
    return optuna.load_study(study_name=name, storage=_storage(url))


def _rows_per_key(out: Path):
    frame, report = load_results(out)
    assert not report.skipped, report.skipped  # every file readable
    return frame, frame["config_key"].value_counts()


def test_four_workers_measure_the_budget_exactly_once_while_the_service_reads(
    recording: Path, tmp_path: Path, storage_for
) -> None:
    out = tmp_path / "out"
    url = storage_for(tmp_path)
    study = f"fleet-{uuid.uuid4().hex[:8]}"
    args = _tuner(recording, out, url, study, trials=FLEET_TRIALS, delay=0.05)
    if url.startswith("journal:"):
        args = args[: args.index("--storage")] + args[args.index("--storage") + 2 :]  # the default
    seen: list[int] = []
    errors: list[str] = []
    started = time.monotonic()
    with running_service(out) as base:
        fleet = _start(["--devices", "0,1,2,3", "--seed", "1", *args])
        done = threading.Event()

        def poll() -> None:
            with httpx.Client(base_url=base, timeout=10) as client:
                while not done.is_set():
                    r = client.get("/results", params={"gpu": "h200", "format": "json"})
                    if r.status_code == 200:
                        seen.append(len(r.json()["rows"]))
                    elif r.status_code != 404:  # 404: no rows yet
                        errors.append(f"{r.status_code} {r.text[:200]}")
                    time.sleep(0.1)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        rc, err = _finish(fleet)
        elapsed = time.monotonic() - started
        # the service catches up: a reload every 0.2 s, each a few seconds at worst on a busy
        # 2-core machine (it builds the whole index again while four workers start and write)
        deadline = time.monotonic() + 60
        while True:
            final = httpx.get(f"{base}/results", params={"gpu": "h200", "format": "json"}, timeout=10)
            served = len(final.json()["rows"]) if final.status_code == 200 else 0  # 404: none yet
            if served == FLEET_TRIALS or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        done.set()
        poller.join(timeout=10)
    assert rc == 0, err[-4000:]
    frame, per_key = _rows_per_key(out)
    assert per_key.max() == 1  # nothing measured twice
    assert len(frame) == FLEET_TRIALS  # exactly the budget, across the four workers
    assert frame["run_id"].nunique() >= 2 and "fleet: 4 workers" in err
    snap = Snapshot.read(_study(url if "--storage" in args else f"journal:{out / 'optuna.journal'}", study))
    assert set(snap.done) == set(frame["config_key"])  # the study and the store agree
    assert not snap.running
    assert not errors and seen == sorted(seen) and served == FLEET_TRIALS, (final.status_code, served)
    trials = len(snap.trials)
    TIMINGS.append(
        f"{url.split(':')[0]}: 4 workers, --trials {FLEET_TRIALS}: {len(frame)} rows, "
        f"{per_key.max()} per config, {trials} Optuna trials, {elapsed:.1f} s; "
        f"the service answered {len(seen)} polls (rows seen {seen[:1]}..{seen[-1:]})"
    )
    # run again: the study is finished, nothing more is measured
    again = _start([*args, "--seed", "3"])
    rc, err = _finish(again)
    assert rc == 0, err[-3000:]
    assert len(load_results(out)[0]) == FLEET_TRIALS


DELAY_S = 0.8  # each measurement of the kill test
MEASURING_S = 0.5  # a trial measuring for less than this is killed before it ends (0.3 s to spare)


def _running_claim(url: str, study: str, pid: int) -> tuple[int, str] | None:
    """(number, key) of a running trial of worker pid that began measuring its configuration
    (ATTR_MEASURING: admitted, answered neither by the study nor by the store, so it can no
    longer yield) at most MEASURING_S ago, as of the end of the read (a read of the study can
    take a few tenths of a second on a busy machine: the window and the delay are wide enough
    for it to land in one). A measurement here takes the DELAY_S replay delay."""
    try:
        snap = Snapshot.read(_study(url, study))
    except KeyError:
        return None
    now = time.time()
    for t in snap.running:
        key, since = t.user_attrs.get(ATTR_KEY), t.user_attrs.get(ATTR_MEASURING)
        if f":{pid}:" not in str(t.user_attrs.get(WORKER, "")) or key is None or since is None:
            continue
        if now - since <= MEASURING_S:
            return t.number, key
    return None


def test_killed_workers_lose_nothing_and_a_late_one_joins(
    recording: Path, tmp_path: Path, storage_for
) -> None:
    out = tmp_path / "out"
    url = storage_for(tmp_path)
    study = f"kill-{uuid.uuid4().hex[:8]}"
    trials = 36  # enough that a victim slow to start (a busy machine) still finds trials to claim
    args = _tuner(recording, out, url, study, trials=trials, delay=DELAY_S)
    started = time.monotonic()
    suicidal = _start(
        [*args, "--seed", "11"], script=[str(Path(__file__).with_name("kill_after_row.py")), "2"]
    )
    victim = _start([*args, "--seed", "12"])
    steady = _start([*args, "--seed", "13"])
    # kill the victim in the middle of a trial: it has claimed, it is waiting out the delay
    deadline = time.monotonic() + 90
    killed = None
    while killed is None and time.monotonic() < deadline:
        killed = _running_claim(url, study, victim.pid)
        if killed is None:
            time.sleep(0.05)
    assert killed is not None, "the victim never claimed a configuration"
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(timeout=10)  # reaped at once, as a shell or the fleet's parent would
    killed_at = time.monotonic() - started
    late = _start([*args, "--seed", "14"])
    rc_suicidal, _ = _finish(suicidal)
    results = [_finish(p) for p in (steady, late)]
    elapsed = time.monotonic() - started
    assert rc_suicidal == -signal.SIGKILL and victim.returncode == -signal.SIGKILL
    for rc, err in results:
        assert rc == 0, err[-4000:]

    frame, per_key = _rows_per_key(out)
    twice = per_key[per_key > 1].index
    assert per_key.max() == 1, _story(frame[frame["config_key"].isin(twice)], url, study)  # whoever queued it
    assert len(frame) == trials, _story(frame, url, study)  # the budget holds exactly, kills and all
    runs = {rid: rid.rsplit("-", 1)[1] for rid in frame["run_id"].unique()}
    by_pid = {pid: rid for rid, pid in runs.items()}
    # the worker killed after writing its second row: both rows stand
    assert (frame["run_id"] == by_pid[str(suicidal.pid)]).sum() == 2
    # the worker killed mid-trial: its configuration was measured once, by another worker
    number, key = killed
    row = frame[frame["config_key"] == key]
    assert len(row) == 1 and row["run_id"].iloc[0] != by_pid.get(str(victim.pid))
    snap = Snapshot.read(_study(url, study))
    assert next(t for t in snap.trials if t.number == number).state == optuna.trial.TrialState.FAIL
    unanswered = frame[~frame["config_key"].isin(set(snap.done))]
    assert not snap.running and unanswered.empty, _story(unanswered, url, study)
    # the late worker joined the running study
    assert any(f":{late.pid}:" in str(t.user_attrs.get(WORKER, "")) for t in snap.trials)
    late_rows = int((frame["run_id"] == by_pid.get(str(late.pid), "")).sum())
    retried = sum(1 for t in snap.trials if "failed_trial" in t.system_attrs)
    TIMINGS.append(
        f"{url.split(':')[0]}: 3+1 workers, --trials {trials}, delay {DELAY_S} s: "
        f"{len(frame)} rows, 1 per config; "
        f"killed mid-trial at {killed_at:.1f} s (trial {number}), {retried} trials retried, "
        f"late worker measured {late_rows}; {len(snap.trials)} Optuna trials, {elapsed:.1f} s"
    )


def _story(rows, url: str, study: str) -> str:
    """The rows and the study's trials of configurations measured twice (for a failure)."""
    lines = [rows[["config_key", "run_id", "trial", "timestamp"]].to_string()]
    for t in _study(url, study).get_trials(deepcopy=False):
        if t.user_attrs.get(ATTR_KEY) in set(rows["config_key"]):
            lines.append(f"trial {t.number} {t.state.name} {t.user_attrs} {t.system_attrs}")
    return "\n".join(lines)


def teardown_module() -> None:
    if TIMINGS:
        print("\n" + "\n".join(TIMINGS))
