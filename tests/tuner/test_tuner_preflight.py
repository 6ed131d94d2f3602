from __future__ import annotations

import os
import socket
import sys
import time
import types
from pathlib import Path

import pytest

from tuner.run.preflight import (
    PreflightError,
    check_cuda,
    check_default_journal,
    check_results_dir,
    check_storage,
)


def closed_port() -> int:
    """A loopback port that nothing listens on (a connection is refused at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_results_dir_that_takes_files_passes_and_nothing_is_left(tmp_path: Path) -> None:
    check_results_dir(tmp_path)
    check_results_dir(tmp_path / "new" / "deeper")  # made later by the run; probed in tmp_path
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("file", "is a file"),
        ("file/under", "is under .*file, a file"),
        ("/proc/repkv-no-such/results", "cannot write there"),
        ("/proc/self", "cannot write there"),  # a directory even root cannot write in
    ],
)
def test_a_results_dir_that_cannot_take_files_is_refused(tmp_path: Path, where: str, message: str) -> None:
    (tmp_path / "file").write_text("x")
    directory = Path(where) if where.startswith("/") else tmp_path / where
    with pytest.raises(
        PreflightError, match=f"--results {directory}.*{message}.*give a directory you can write"
    ):
        check_results_dir(directory)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes in any directory")
def test_a_read_only_results_dir_is_refused(tmp_path: Path) -> None:
    tmp_path.chmod(0o555)
    try:
        with pytest.raises(PreflightError, match="Permission denied"):
            check_results_dir(tmp_path / "results")
    finally:
        tmp_path.chmod(0o755)


def test_storages_that_open_pass(tmp_path: Path) -> None:
    for url in (None, "memory", f"journal:{tmp_path}/optuna.journal", f"sqlite:///{tmp_path}/new.db"):
        check_storage(url)
    (tmp_path / "optuna.db").write_bytes(b"")
    check_storage(f"sqlite:///{tmp_path}/optuna.db")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("redis://localhost:6379", "redis://...: this tuner cannot keep a study there: use journal:FILE"),
        ("http://localhost:8000/optuna", "http://...: this tuner cannot keep a study there"),
        ("journal:{tmp}/file/optuna.journal", "file is a file: name a file in a directory"),
        ("sqlite:///{tmp}/file/optuna.db", "file is a file"),
        ("sqlite:///{tmp}/typo/dir/optuna.db", "the directory .*/typo/dir does not exist"),
        ("journal:{tmp}", "is a directory: name a file in it"),
        ("journal:/proc/self/optuna.journal", "cannot write there"),
    ],
)
def test_storages_that_cannot_open_are_refused_without_connecting(
    tmp_path: Path, url: str, message: str
) -> None:
    (tmp_path / "file").write_text("x")
    url = url.format(tmp=tmp_path)
    with pytest.raises(PreflightError, match=f"^--storage .*{message}"):
        check_storage(url)


def test_a_storage_file_that_holds_something_else_is_refused(tmp_path: Path) -> None:
    """A results file or a header named as the storage raised a traceback from SQLAlchemy
    (file is not a database) or from the journal's JSON reader."""
    other = tmp_path / "repkv_tuned.cuh"
    other.write_text("// repkv_tuned.cuh\n#pragma once\n")
    for url, what in (
        (f"sqlite:///{other}", "an SQLite database"),
        (f"journal:{other}", "an Optuna journal"),
    ):
        with pytest.raises(PreflightError, match=f"^--storage .*{other} is not {what}: name a new file"):
            check_storage(url)
    made = tmp_path / "optuna.journal"
    made.write_text('{"op_code":0,"worker_id":"w","study_name":"s","directions":[1]}\n')
    check_storage(f"journal:{made}")


def test_a_default_journal_that_cannot_be_written_is_refused(tmp_path: Path, monkeypatch) -> None:
    """A read-only <results>/optuna.journal passed the checks, and the run ended in a
    PermissionError traceback at the study's first append."""
    journal = tmp_path / "optuna.journal"
    journal.write_text('{"op_code":0,"worker_id":"w","study_name":"s","directions":[1]}\n')
    opened = Path.open

    def read_only(self: Path, mode: str = "r", *args, **kwargs):
        if self == journal and "a" in mode:  # as chmod a-w does, for a user that is not root
            raise PermissionError(13, "Permission denied", str(self))
        return opened(self, mode, *args, **kwargs)

    monkeypatch.setattr(Path, "open", read_only)
    with pytest.raises(PreflightError, match=f"^cannot write {journal} \\(Permission denied\\), where a run"):
        check_default_journal(tmp_path)


def test_an_unreachable_database_is_one_attempt_and_its_password_is_not_shown() -> None:
    url = f"postgresql://tuner:s3cret@127.0.0.1:{closed_port()}/optuna"
    start = time.monotonic()
    with pytest.raises(PreflightError) as info:
        check_storage(url, timeout_s=2)
    assert time.monotonic() - start < 10
    message = str(info.value)
    assert message.startswith("--storage postgresql://tuner:***@127.0.0.1:")
    assert "s3cret" not in message and "\n" not in message
    assert "cannot connect" in message or "pip install 'repkv-tune[postgres]'" in message


def fake_cupy(monkeypatch: pytest.MonkeyPatch, count: int | Exception) -> None:
    """A `cupy` whose runtime answers getDeviceCount with `count` (or raises it)."""

    class CUDARuntimeError(RuntimeError):
        pass

    def get_device_count() -> int:
        if isinstance(count, Exception):
            raise CUDARuntimeError(str(count))
        return count

    runtime = types.SimpleNamespace(getDeviceCount=get_device_count, CUDARuntimeError=CUDARuntimeError)
    monkeypatch.setitem(
        sys.modules, "cupy", types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=runtime))
    )


def test_without_cupy_the_message_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy -> ImportError
    with pytest.raises(
        PreflightError, match=r"CuPy is not installed: pip install 'repkv-tune\[cuda12\]'.*--replay DIR"
    ):
        check_cuda()


def test_without_a_driver_the_message_names_the_cause_and_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_cupy(monkeypatch, RuntimeError("cudaErrorInsufficientDriver: CUDA driver version is insufficient"))
    with pytest.raises(PreflightError) as info:
        check_cuda()
    message = str(info.value)
    assert "cudaErrorInsufficientDriver" in message and "install an NVIDIA driver" in message
    assert "[cuda12]" in message and "[cuda13]" in message and "--replay DIR" in message


def test_a_device_index_past_the_host_gpus_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_cupy(monkeypatch, 2)
    check_cuda(1)
    with pytest.raises(PreflightError, match="--device 2: this host has 2 GPU"):
        check_cuda(2)
    fake_cupy(monkeypatch, 0)
    with pytest.raises(PreflightError, match="CUDA sees none"):
        check_cuda(0)
