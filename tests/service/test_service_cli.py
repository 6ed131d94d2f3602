from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from conftest import REPO

from service.cli import main, settings_from
from service.settings import DEFAULT_RESULTS_DIR


def test_defaults_serve_the_bundled_results_on_localhost(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("REPKV_RESULTS_DIR", "REPKV_HOST", "REPKV_PORT", "REPKV_RELOAD_INTERVAL"):
        monkeypatch.delenv(name, raising=False)
    settings = settings_from([])
    assert (settings.host, settings.port, settings.results_dir) == ("127.0.0.1", 8000, DEFAULT_RESULTS_DIR)
    assert DEFAULT_RESULTS_DIR == REPO / "results" / "data"


def test_environment_then_flags(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("REPKV_PORT", "9001")
    monkeypatch.setenv("REPKV_RESULTS_DIR", str(tmp_path))
    monkeypatch.setenv("REPKV_RELOAD_INTERVAL", "0.5")
    settings = settings_from([])
    assert (settings.port, settings.results_dir, settings.reload_interval) == (9001, tmp_path, 0.5)
    assert settings_from(["--port", "9002", "--host", "0.0.0.0"]).port == 9002


@pytest.mark.parametrize(
    "argv", [["--port", "abc"], ["--port", "70000"], ["--bogus"], ["--reload-interval", "-1"], ["extra"]]
)
def test_usage_errors_print_one_line_and_return_2(argv: list[str], capsys: pytest.CaptureFixture) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("python -m service:")


def test_results_dir_that_is_a_file_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    file = tmp_path / "file"
    file.write_text("x")
    assert main(["--results-dir", str(file)]) == 2
    assert "not a directory" in capsys.readouterr().err


def test_help_runs_without_a_gpu() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "service", "--help"], cwd=REPO, capture_output=True, text=True
    )
    assert out.returncode == 0 and "REPKV_RESULTS_DIR" in out.stdout


def test_python_m_service_serves(live_server: str) -> None:
    assert httpx.get(f"{live_server}/best", params={"B": 8, "T": 1024}).status_code == 200
    assert httpx.get(f"{live_server}/healthz").json() == {"status": "ok"}
