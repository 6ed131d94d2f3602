"""Fixtures of the service tests: small trial tables written by the tests themselves (every
row says "synthetic"; nothing here is a measurement), an app over them, a live server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from live_service import free_port, running_service  # noqa: F401
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


@pytest.fixture
def live_server(store_dir: Path) -> Iterator[str]:
    """`python -m service` in a subprocess on a free port, serving store_dir."""
    with running_service(store_dir) as url:
        yield url
