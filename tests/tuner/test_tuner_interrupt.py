"""Ctrl-C on a running tuner (a real process, a real SIGINT): one stops it within a second or
two, with every row readable, what was measured printed and exit status 130; a second one
quits at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import tuner_fakes as F

from results.store import load_results
from tuner.interrupt import StopFlag, sigint_stops

ROOT = Path(__file__).resolve().parents[2]
SMALL = "B=1,T=256,NH=14,NH_KV=2,HD=64"


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("recording")
    F.write_recording(directory, [F.SMALL], ["bf16"])
    return directory


def _tuner(recording: Path, out: Path) -> subprocess.Popen:
    argv = ["--replay", str(recording), "--shape", SMALL, "--dtype", "bf16", "--trials", "60"]
    argv += ["--results", str(out), "--replay-delay", "0.3", "--no-progress", "--seed", "0"]
    return subprocess.Popen(
        [sys.executable, "-m", "tuner", *argv],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _rows(out: Path) -> int:
    return len(load_results(out)[0])


def _wait_for_rows(proc: subprocess.Popen, out: Path, n: int) -> None:
    deadline = time.monotonic() + 120
    while _rows(out) < n:
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "no rows written"
        time.sleep(0.05)


def test_one_ctrl_c_stops_within_seconds_keeps_every_row_and_reports_them(
    recording: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    proc = _tuner(recording, out)
    _wait_for_rows(proc, out, 3)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    took = time.monotonic() - sent
    assert proc.returncode == 130, stderr[-3000:]
    assert took < 3.0, f"took {took:.1f} s to stop"
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    rows = _rows(out)  # every file readable, every row there
    assert rows >= 3 and f"{rows} rows in " in stderr
    assert f"{rows} measured" in stderr
    assert "no correct measurement" not in stdout and "Winners on h200" in stdout
    assert stderr.rstrip().endswith("interrupted: run the same command again to resume")
    assert not list(out.rglob(".tmp-*"))


def test_a_second_ctrl_c_quits_at_once(recording: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = _tuner(recording, out)
    _wait_for_rows(proc, out, 1)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.02)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    took = time.monotonic() - sent
    # 130 whenever the second Ctrl-C lands: the handler stays after the first, through the
    # report and the interpreter's shutdown (Python's own would die by SIGINT, -2, there)
    assert proc.returncode == 130 and took < 2.0, (proc.returncode, took, stderr[-2000:])
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    # the run may have finished stopping before the second one came
    assert "quitting now" in stderr or stderr.rstrip().endswith("run the same command again to resume")
    assert _rows(out) >= 1  # what was written stays readable


def test_the_handler_restores_the_default_when_no_signal_came() -> None:
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    with sigint_stops(StopFlag()):
        assert signal.getsignal(signal.SIGINT) is not before[0]
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_after_a_ctrl_c_the_handler_stays_so_a_second_one_never_raises() -> None:
    flag = StopFlag()
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    try:
        with sigint_stops(flag, message="stopping"):
            os.kill(os.getpid(), signal.SIGINT)
            deadline = time.monotonic() + 5
            while not flag and time.monotonic() < deadline:
                time.sleep(0.01)
            assert flag and flag.reason == "interrupted"
        # the run is stopping: a second Ctrl-C must reach the quit-now path, not Python's
        # KeyboardInterrupt (which left a traceback, or a death by SIGINT, during shutdown)
        assert signal.getsignal(signal.SIGINT) is not before[0]
        assert signal.getsignal(signal.SIGTERM) is before[1]
    finally:
        signal.signal(signal.SIGINT, before[0])
    assert StopFlag().sleep(0.01) is False
