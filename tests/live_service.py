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
    base URL once /readyz answers."""
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
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                out = proc.stdout.read().decode() if proc.stdout else ""
                pytest.fail(f"the service did not become ready: {out[-2000:]}")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
