"""The service tests' app over a results directory, and the checkout's root (imported by name:
the test files import from here, never from conftest, which pytest may load for another folder)."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from service.api.app import create_app
from service.live_store import ResultsStore
from service.settings import Settings

REPO = Path(__file__).resolve().parents[2]


def make_client(directory: Path, interval: float = 30.0) -> TestClient:
    store = ResultsStore(directory, interval=interval)
    return TestClient(create_app(Settings(results_dir=directory, reload_interval=interval), store))
