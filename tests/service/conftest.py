"""Fixtures of the service tests: small trial tables written by the tests themselves (every
row says "synthetic"; nothing here is a measurement), an app over them, a live server."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from trial_rows import (  # noqa: F401  (re-exported to the service tests)
    GATHER,
    NAIVE128,
    S1,
    S2,
    SPLIT16,
    VEC16,
    WPH,
    h100_rows,
    other_rows,
    trial,
)

from results.store import write_table
from service.api.app import create_app
from service.live_store import ResultsStore
from service.settings import Settings

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "results"
    write_table(h100_rows(), directory, "synthetic-h100")
    write_table(other_rows(), directory, "synthetic-others")
    return directory


def make_client(directory: Path, interval: float = 30.0) -> TestClient:
    store = ResultsStore(directory, interval=interval)
    return TestClient(create_app(Settings(results_dir=directory, reload_interval=interval), store))


@pytest.fixture
def client(store_dir: Path) -> Iterator[TestClient]:
    with make_client(store_dir) as c:
        assert c.app.state.store.wait_ready(30)
        yield c


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def live_server(store_dir: Path) -> Iterator[str]:
    """`python -m service` in a subprocess on a free port, serving store_dir."""
    port = free_port()
    env = {**os.environ, "REPKV_RESULTS_DIR": str(store_dir), "REPKV_RELOAD_INTERVAL": "0.2"}
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
