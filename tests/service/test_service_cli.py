from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from service_client import REPO

from service.cli import main, parser, settings_from

BUNDLED = REPO / "results" / "data"


def test_defaults_serve_the_user_results_and_the_bundled_ones_on_localhost(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("REPKV_RESULTS_DIR", "REPKV_BUNDLED", "REPKV_HOST", "REPKV_PORT", "REPKV_RELOAD_INTERVAL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    settings = settings_from([])
    user = tmp_path / "repkv-tune" / "results"
    assert (settings.host, settings.port, settings.results_dir) == ("127.0.0.1", 8000, user)
    assert settings.read_dirs() == [user, BUNDLED]


def test_environment_then_flags(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("REPKV_PORT", "9001")
    monkeypatch.setenv("REPKV_RESULTS_DIR", str(tmp_path))
    monkeypatch.setenv("REPKV_RELOAD_INTERVAL", "0.5")
    settings = settings_from([])
    assert (settings.port, settings.results_dir, settings.reload_interval) == (9001, tmp_path, 0.5)
    assert settings.read_dirs() == [tmp_path, BUNDLED]  # the bundled results are read beside it
    assert settings_from(["--port", "9002", "--host", "0.0.0.0"]).port == 9002
    other = tmp_path / "other"
    assert settings_from(["--results-dir", str(other), "--no-bundled"]).read_dirs() == [other]
    monkeypatch.setenv("REPKV_BUNDLED", "false")
    assert settings_from([]).read_dirs() == [tmp_path]
    assert settings_from(["--results-dir", str(BUNDLED)]).read_dirs() == [BUNDLED]


def test_the_app_serves_both_directories_and_readyz_lists_them(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from service.api.app import create_app
    from service.settings import Settings

    empty = tmp_path / "mine"  # not there yet: skipped
    with TestClient(create_app(Settings(results_dir=empty))) as client:
        assert client.app.state.store.wait_ready(60)
        ready = client.get("/readyz").json()
        assert ready["directories"] == ["results", "bundled"] and ready["rows"] > 0
        assert ready["missing_directories"] == ["results"]
        assert all(f.startswith("bundled:") for f in ready["files"])
        answers = client.get("/best", params={"B": 8, "T": 1024, "gpu": "h200"}).json()["answers"]
        assert answers[0]["match"] == "exact"


@pytest.mark.parametrize(
    "argv",
    [
        ["--port", "abc"],
        ["--port", "70000"],
        ["--bogus"],
        ["--reload-interval", "-1"],
        ["extra"],
        ["--reload-interval", "nan"],
        ["--reload-interval", "inf"],
    ],
)
def test_usage_errors_print_one_line_and_return_2(argv: list[str], capsys: pytest.CaptureFixture) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("python -m service:")


@pytest.mark.parametrize(
    ("argv0", "prog"),
    [("/venv/bin/repkv-serve", "repkv-serve"), (str(REPO / "service" / "__main__.py"), "python -m service")],
)
def test_usage_and_error_lines_name_the_command_as_it_was_started(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, argv0: str, prog: str
) -> None:
    monkeypatch.setattr(sys, "argv", [argv0])
    assert main(["--bogus"]) == 2
    assert capsys.readouterr().err.startswith(f"{prog}: ")
    with pytest.raises(SystemExit):
        main(["--help"])
    assert capsys.readouterr().out.startswith(f"usage: {prog} ")


def test_the_installed_script_names_itself() -> None:
    script = Path(sys.executable).with_name("repkv-serve")
    if not script.exists():
        pytest.skip("repkv-serve is not installed beside this interpreter")
    proc = subprocess.run([script, "--bogus"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.startswith("repkv-serve: "), proc.stderr


def test_a_port_in_use_is_said_in_one_line_before_the_store_is_loaded(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    import service.api.app

    def create_app(*args: object, **kwargs: object) -> None:
        raise AssertionError("the app, and so its store, was made")

    monkeypatch.setattr(service.api.app, "create_app", create_app)
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        for host in ("127.0.0.1", "localhost"):
            assert main(["--port", str(port), "--host", host, "--results-dir", str(BUNDLED)]) == 2
            err = capsys.readouterr().err
            assert err == f"python -m service: port {port} on {host} is in use; pick another with --port\n"
    from service.cli import bind_problem

    assert bind_problem("127.0.0.1", port) is None  # free again once closed


def test_results_dir_that_is_a_file_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    file = tmp_path / "file"
    file.write_text("x")
    assert main(["--results-dir", str(file)]) == 2
    assert "not a directory" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("REPKV_PORT", "abc", "REPKV_PORT: Input should be a valid integer"),
        ("REPKV_RELOAD_INTERVAL", "-1", "REPKV_RELOAD_INTERVAL: Input should be greater than 0"),
        ("REPKV_RESULTS_DIR", "FILE", "REPKV_RESULTS_DIR: FILE is not a directory"),
    ],
)
def test_a_bad_environment_variable_is_named_not_its_flag(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
    tmp_path: Path,
    name: str,
    value: str,
    expected: str,
) -> None:
    # the error named --port (or --reload-interval, --results-dir), which nobody typed
    file = tmp_path / "file"
    file.write_text("x")
    value, expected = value.replace("FILE", str(file)), expected.replace("FILE", str(file))
    monkeypatch.setenv(name, value)
    assert main([]) == 2
    assert capsys.readouterr().err.startswith(f"python -m service: {expected}")
    flag = "--" + name.removeprefix("REPKV_").lower().replace("_", "-")
    assert main([flag, value]) == 2
    err = capsys.readouterr().err
    assert flag in err and name not in err  # given as a flag: the flag


@pytest.mark.parametrize(
    ("name", "read"), [("REPKV_NO_BUNDLED", "REPKV_BUNDLED"), ("REPKV_NO_ACCESS_LOG", "REPKV_ACCESS_LOG")]
)
def test_the_environment_name_of_a_no_flag_is_refused_naming_the_one_read(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, name: str, read: str
) -> None:
    # REPKV_<OPTION> of --no-bundled was ignored: the bundled results were served all the same
    import service.cli

    monkeypatch.setattr(service.cli, "bind_problem", lambda host, port: "not served in this test")
    monkeypatch.setenv(name, "1")
    assert main([]) == 2
    assert (
        capsys.readouterr().err
        == f"python -m service: {name} is not read: set {read}=false instead (see --help)\n"
    )
    assert f"{read}=false" in " ".join(parser().format_help().split())


def test_an_empty_results_dir_is_not_the_current_directory(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    # '' was Path('.'): the service read every parquet file under the directory it started in
    import service.cli

    monkeypatch.setattr(service.cli, "bind_problem", lambda host, port: "not served in this test")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert main(["--results-dir", ""]) == 2
    assert "--results-dir: needs a directory, not an empty string" in capsys.readouterr().err
    monkeypatch.setenv("REPKV_RESULTS_DIR", "")  # empty is unset, as the tuner reads it
    assert settings_from([]).results_dir == tmp_path / "repkv-tune" / "results"


def test_a_results_dir_under_home_is_the_tuners(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # REPKV_RESULTS_DIR=~/results: the tuner wrote under $HOME, the service read ./~/results
    from results.store import user_results_dir

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("REPKV_RESULTS_DIR", "~/results")
    assert settings_from([]).results_dir == user_results_dir() == tmp_path / "results"
    assert settings_from(["--results-dir", "~/other"]).results_dir == tmp_path / "other"


def test_help_runs_without_a_gpu() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "service", "--help"], cwd=REPO, capture_output=True, text=True
    )
    assert out.returncode == 0 and "REPKV_RESULTS_DIR" in out.stdout


def test_python_m_service_serves(live_server: str) -> None:
    assert httpx.get(f"{live_server}/best", params={"B": 8, "T": 1024}).status_code == 200
    assert httpx.get(f"{live_server}/healthz").json() == {"status": "ok"}
