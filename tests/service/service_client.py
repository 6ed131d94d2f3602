"""The service tests' app over a results directory, and the checkout's root (imported by name:
the test files import from here, never from conftest, which pytest may load for another folder)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fastapi.testclient import TestClient
from trial_rows import h100_rows, other_rows

from results.store import write_table
from service.api.app import create_app
from service.live_store import ResultsStore
from service.settings import Settings

REPO = Path(__file__).resolve().parents[2]


def make_client(directory: Path, interval: float = 30.0) -> TestClient:
    store = ResultsStore(directory, interval=interval)
    return TestClient(create_app(Settings(results_dir=directory, reload_interval=interval), store))


@contextmanager
def ready_client(directory: Path, interval: float = 30.0) -> Iterator[TestClient]:
    """`make_client`, started, once its store has read the directory (or said why it cannot)."""
    with make_client(directory, interval) as client:
        assert client.app.state.store.wait_ready(30)
        yield client


def write_service_rows(directory: Path) -> Path:
    """The service tests' rows (trial_rows: h100's and the other GPUs') written in `directory`."""
    write_table(h100_rows(), directory, "synthetic-h100")
    write_table(other_rows(), directory, "synthetic-others")
    return directory
