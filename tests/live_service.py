"""`python -m service` in a subprocess on a free port, for the tests that need a real server."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running_service(results_dir: Path) -> Iterator[str]:
    """The service serving results_dir (only: not the bundled results beside it); yields its
    base URL once /readyz answers. A port taken between choosing and binding it (by a test in
    another pytest-xdist worker) is chosen again."""
    for _ in range(3):
        proc, url = _start(results_dir)
        try:
            ready, out = _wait_ready(proc, url)
            if not ready and any(taken in out.lower() for taken in ("address already in use", "is in use;")):
                continue
            if not ready:
                pytest.fail(f"the service did not become ready: {out[-2000:]}")
            yield url
            return
        finally:
            _stop(proc)
    pytest.fail("the service found no free port in three tries")


def _start(results_dir: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "REPKV_RESULTS_DIR": str(results_dir), "REPKV_BUNDLED": "false"}
    env["REPKV_RELOAD_INTERVAL"] = "0.2"
    proc = subprocess.Popen(
        [sys.executable, "-m", "service", "--port", str(port), "--log-level", "warning"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    return proc, f"http://127.0.0.1:{port}"


def _wait_ready(proc: subprocess.Popen, url: str, timeout: float = 60) -> tuple[bool, str]:
    """(ready, the output of a service that is not); one that neither answers nor exits within
    `timeout` is killed first, so that reading its output cannot hang."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return True, ""
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            out = proc.stdout.read().decode() if proc.stdout else ""
            proc.wait()  # its output ends before the kernel has reaped it: wait, so poll() sees the exit
            return False, out
        time.sleep(0.1)


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
