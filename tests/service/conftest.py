"""Fixtures of the service tests: small trial tables written by the tests themselves (every
row says "synthetic"; nothing here is a measurement), an app over them, a live server. The
tests import names from trial_rows, service_client and live_service, not from here."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from live_service import running_service
from service_client import make_client
from trial_rows import h100_rows, other_rows

from results.store import write_table


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "results"
    write_table(h100_rows(), directory, "synthetic-h100")
    write_table(other_rows(), directory, "synthetic-others")
    return directory


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
