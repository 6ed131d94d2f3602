"""Fixtures of the service tests: small trial tables written by the tests themselves (every
row says "synthetic"; nothing here is a measurement), an app over them, a live server. The
tests import names from trial_rows, service_client and live_service, not from here."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from live_service import running_service
from service_client import ready_client, write_service_rows


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    """The service tests' rows in a directory of the test's own, to change."""
    return write_service_rows(tmp_path / "results")


@pytest.fixture(scope="module")
def served_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same rows, which `client` serves: one directory for a test module, never changed."""
    return write_service_rows(tmp_path_factory.mktemp("served") / "results")


@pytest.fixture(scope="module")
def client(served_dir: Path) -> Iterator[TestClient]:
    """One app over `served_dir` for a test module's requests (an app and its store take a
    second to start on a busy machine; the tests that change the directory or the app make
    their own, over `store_dir`)."""
    with ready_client(served_dir) as c:
        yield c


@pytest.fixture
def live_server(store_dir: Path) -> Iterator[str]:
    """`python -m service` in a subprocess on a free port, serving store_dir."""
    with running_service(store_dir) as url:
        yield url
