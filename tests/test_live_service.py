"""The live-service helper fails a test that waits for a server, and never hangs it."""

from __future__ import annotations

import subprocess
import sys
import time

from live_service import _wait_ready, free_port


def test_a_server_that_never_answers_is_killed_and_its_output_read_at_the_deadline() -> None:
    # prints, then neither answers nor exits: reading its output before killing it would hang
    code = "import sys, time; print('still starting', flush=True); time.sleep(120)"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    started = time.monotonic()
    ready, out = _wait_ready(proc, f"http://127.0.0.1:{free_port()}", timeout=2)
    assert not ready and "still starting" in out
    assert time.monotonic() - started < 30
    assert proc.poll() is not None
