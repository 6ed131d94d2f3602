"""Ctrl-C on a running tuner (a real process, a real SIGINT): one stops it within a second or
two, with every row readable, what was measured printed and exit status 130; a second one
quits at once; before trials run (imports, start-up) one quits at once with one line.

The processes start with SIGINT at its default, as from a terminal, whatever this one
inherited (`nohup ./test.sh &` starts with it ignored)."""

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


def _from_a_terminal() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _with_sigint_ignored() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _tuner(
    recording: Path, out: Path, trials: int = 60, delay: float = 0.3, start=_from_a_terminal
) -> subprocess.Popen:
    argv = ["--replay", str(recording), "--shape", SMALL, "--dtype", "bf16", "--trials", str(trials)]
    argv += ["--results", str(out), "--replay-delay", str(delay), "--no-progress", "--seed", "0"]
    return subprocess.Popen(
        [sys.executable, "-m", "tuner", *argv],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=start,
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
    inherited = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as from a terminal, even under nohup
    try:
        before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
        with sigint_stops(StopFlag()):
            assert signal.getsignal(signal.SIGINT) is not before[0]
        assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
    finally:
        signal.signal(signal.SIGINT, inherited)


def _wait_for(flag: StopFlag) -> None:
    deadline = time.monotonic() + 5
    while not flag and time.monotonic() < deadline:
        time.sleep(0.01)


def test_after_a_ctrl_c_the_handler_stays_so_a_second_one_never_raises() -> None:
    flag = StopFlag()
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as from a terminal, whatever pytest inherited
    try:
        with sigint_stops(flag, message="stopping"):
            os.kill(os.getpid(), signal.SIGINT)
            _wait_for(flag)
            assert flag and flag.reason == "interrupted"
        # the run is stopping: a second Ctrl-C must reach the quit-now path, not Python's
        # KeyboardInterrupt (which left a traceback, or a death by SIGINT, during shutdown)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) is before[1]
        os.kill(os.getpid(), signal.SIGINT)  # and indeed raises nothing
        time.sleep(0.05)
    finally:
        signal.signal(signal.SIGINT, before[0])
    assert StopFlag().sleep(0.01) is False


def test_a_sigint_ignored_from_the_start_stays_ignored_and_sigterm_stops() -> None:
    """`tuner ... &` in a script starts with SIGINT ignored (the Ctrl-C meant for the
    script's foreground spares it): it stays so, and SIGTERM is what stops the run."""
    flag = StopFlag()
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with sigint_stops(flag, message="stopping"):
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.1)
            assert not flag
            os.kill(os.getpid(), signal.SIGTERM)
            _wait_for(flag)
            assert flag and flag.reason == "terminated"
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) is before[1]
    finally:
        signal.signal(signal.SIGINT, before[0])


def test_a_run_started_with_sigint_ignored_ignores_it_and_stops_on_sigterm(
    recording: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    proc = _tuner(recording, out, start=_with_sigint_ignored)
    _wait_for_rows(proc, out, 2)
    proc.send_signal(signal.SIGINT)
    time.sleep(1.0)
    assert proc.poll() is None, proc.communicate()[1][-3000:]
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130 and time.monotonic() - sent < 3.0, stderr[-3000:]
    assert stderr.rstrip().endswith("interrupted: run the same command again to resume")


# What a Ctrl-C's last line may be: before trials run or while the report prints (quit at
# once), during them (stop after the current trial, report), a second one.
LAST_LINES = (
    "interrupted",
    "interrupted: run the same command again to resume",
    "interrupted again: quitting now",
)


def _python_start() -> float:
    """How long Python takes here, now, to start and import the package: before that no line of
    the tuner has run, and a Ctrl-C is Python's own (the slowest of three)."""
    took = []
    for _ in range(3):
        started = time.monotonic()
        subprocess.run([sys.executable, "-c", "import tuner.interrupt"], cwd=ROOT, check=True)
        took.append(time.monotonic() - started)
    return max(took)


def test_a_ctrl_c_at_any_moment_exits_130_with_one_line_within_a_second(
    recording: Path, tmp_path: Path
) -> None:
    """From the tuner's first line to the interpreter's exit: never a KeyboardInterrupt
    traceback or a death by SIGINT (-2), and never the 4-7 s a start-up went on before the stop
    was seen. The imports alone take longer than the first few moments."""
    first = 1.5 * _python_start()
    moments = [first + step for step in (0.0, 0.1, 0.25, 0.5, 0.8, 1.2, 1.8, 2.6, 3.5)]
    for moment in moments:
        for attempt in range(10):
            proc = _tuner(recording, tmp_path / f"out-{moment}-{attempt}", trials=4, delay=0.2)
            time.sleep(moment)
            sent = time.monotonic()
            proc.send_signal(signal.SIGINT)
            _, stderr = proc.communicate(timeout=60)
            took = time.monotonic() - sent
            # a machine busier than when _python_start measured it: the Ctrl-C came while the
            # interpreter was still starting, before any line of the tuner; try a little later
            if "Fatal Python error: init_import_site" not in stderr:
                break
            moment += 0.05
        assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, (moment, stderr[-3000:])
        if proc.returncode == 0:  # it had finished
            continue
        assert proc.returncode == 130, (moment, proc.returncode, stderr[-3000:])
        assert stderr.splitlines()[-1] in LAST_LINES, (moment, stderr[-3000:])
        assert took < 1.5, (moment, took, stderr[-3000:])


def test_before_trials_run_a_ctrl_c_quits_at_once_and_during_them_lets_the_trial_finish() -> None:
    code = (
        "import os, signal, sys, time\n"
        "from tuner.interrupt import StopFlag, sigint_stops\n"
        "flag = StopFlag()\n"
        "with sigint_stops(flag, at_once_outside=True):\n"
        "    if sys.argv[1] == 'trials':\n"
        "        with flag.finishing():\n"
        "            os.kill(os.getpid(), signal.SIGINT)\n"
        "            time.sleep(0.2)\n"
        "        print('finished the trial', bool(flag))\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    time.sleep(10)\n"
        "print('not reached')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for phase, stdout, last in (("start", "", "interrupted"), ("trials", "finished the trial True\n", None)):
        started = time.monotonic()
        out = subprocess.run(
            [sys.executable, "-c", code, phase],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            preexec_fn=_from_a_terminal,
        )
        assert out.returncode == 130 and out.stdout == stdout, (phase, out)
        assert time.monotonic() - started < 8, phase
        assert out.stderr.splitlines()[-1] == (last or "interrupted again: quitting now"), out.stderr


def test_a_fleet_started_with_sigint_ignored_stops_every_worker_on_sigterm(
    recording: Path, tmp_path: Path
) -> None:
    """The workers inherit the ignored SIGINT: the parent relays SIGTERM, which they heed."""
    argv = ["--replay", str(recording), "--devices", "0,1", "--shape", SMALL, "--dtype", "bf16"]
    argv += ["--trials", "60", "--replay-delay", "0.3", "--results", str(tmp_path / "out"), "--no-progress"]
    argv += ["--storage", f"journal:{tmp_path / 'fleet.journal'}"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tuner", *argv],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_with_sigint_ignored,
    )
    _wait_for_rows(proc, tmp_path / "out", 4)
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130 and time.monotonic() - sent < 5.0, stderr[-3000:]
    assert "fleet: exit status per device: 0: 130, 1: 130" in stderr


@pytest.mark.parametrize("to_the_group", [True, False])
def test_a_ctrl_c_during_replay_eval_leaves_one_line_and_no_worker(to_the_group: bool) -> None:
    """A terminal's Ctrl-C reaches every process of the group, `kill -INT` the parent alone:
    either way one line, status 130, and the pool's workers gone with the parent."""
    argv = ["replay-eval", "bundled", "--gpu", "h200", "--seeds", "20", "--jobs", "2"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tuner", *argv],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=_from_a_terminal,
    )
    assert proc.stderr is not None
    first = proc.stderr.readline()  # "replay-eval: N runs": the pool starts now
    assert first.startswith("replay-eval: ") and first.rstrip().endswith(" runs"), first
    time.sleep(1.0)
    if to_the_group:
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr[-3000:]
    assert stderr.splitlines()[-1] == "interrupted" and stderr.count("interrupted") == 1, stderr
    assert "Traceback" not in stderr, stderr
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)  # any process of the group left?
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError("a replay-eval worker outlived its parent")
