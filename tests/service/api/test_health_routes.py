from __future__ import annotations

import json
import os
import time
from pathlib import Path

from fastapi.testclient import TestClient
from service_client import make_client, ready_client
from trial_rows import S1, VEC16, trial

from results.store import bundled_results_dir, write_table
from service.api.app import create_app
from service.live_store import ResultsStore
from service.settings import Settings


def test_healthz_and_readyz(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz").json()
    assert ready["ready"] is True and ready["generation"] == 1
    assert sorted(ready["files"]) == ["synthetic-h100.parquet", "synthetic-others.parquet"]
    assert ready["skipped"] == {} and ready["rows"] == 11


def test_readyz_counts_the_tuned_groups_of_every_op(tmp_path: Path) -> None:
    """`rows` counts every op's rows, and so does `tuned`: a store of repkv_forward alone is not
    '3 rows, 0 tuned'; each op's count is beside it, and every op's index is built as the store
    loads, not by the first request that names the op."""
    forward = {"block": 256, "vec_bytes": 16, "load": "ldg", "store": "stcs"}
    rows = [
        trial("h100", S1, "bf16", "vec", forward, 0.07, op="repkv_forward", number=0),
        trial("h100", S1, "fp32", "vec", forward, 0.09, op="repkv_forward", number=1),
        trial("h200", S1, "bf16", "vec", VEC16, 0.1),
    ]
    write_table(rows, tmp_path, "two-ops")
    with ready_client(tmp_path) as c:
        ready = c.get("/readyz").json()
        assert ready["rows"] == 3 and ready["tuned"] == 3
        assert ready["tuned_by_op"] == {
            "repkv_backward": 1,
            "repkv_forward": 2,
            "rope_repkv_forward": 0,
            "repkv_rope_backward": 0,
        }
        assert set(c.app.state.store.state.index._ops) == {
            "repkv_forward",
            "rope_repkv_forward",
            "repkv_rope_backward",
        }


def test_readyz_is_503_before_the_first_load(store_dir: Path) -> None:
    c = make_client(store_dir)  # no lifespan: the store never starts
    r = c.get("/readyz")
    assert r.status_code == 503 and r.json()["ready"] is False
    r = c.get("/best", params={"B": 8, "T": 1024})
    assert r.status_code == 503 and "loading" in r.json()["detail"]


def test_corrupt_and_temporary_files_are_skipped_and_reported(store_dir: Path) -> None:
    (store_dir / "half-written.parquet").write_bytes(b"PAR1\x00\x01garbage")
    (store_dir / ".tmp-abc.parquet").write_bytes(b"PAR1")  # a writer's temporary file
    with ready_client(store_dir) as c:
        ready = c.get("/readyz").json()
        assert list(ready["skipped"]) == ["half-written.parquet"]
        assert "unreadable parquet" in ready["skipped"]["half-written.parquet"]
        assert str(store_dir) not in ready["skipped"]["half-written.parquet"]
        assert len(ready["files"]) == 2
        assert c.get("/best", params={"B": 8, "T": 1024, "gpu": "h100"}).status_code == 200


def test_directories_that_cannot_be_read_are_reported_not_served_as_empty(
    store_dir: Path, monkeypatch
) -> None:
    """A subdirectory, or the results directory itself, that cannot be listed (as for a user
    without permission: the tests may run as root, where chmod does not keep anyone out) is
    named in /readyz, never as its place on the server; the rest is served."""
    write_table([trial("a100", S1, "bf16", "vec", VEC16, 0.2)], store_dir / "a100", "synthetic-a100")
    locked = {store_dir / "a100"}
    listing = os.scandir

    def scandir(path="."):
        if Path(path) in locked:
            raise PermissionError(13, "Permission denied", str(path))
        return listing(path)

    monkeypatch.setattr(os, "scandir", scandir)
    with ready_client(store_dir) as c:
        ready = c.get("/readyz").json()
        assert ready["skipped"] == {
            "a100": "a directory that cannot be read (Permission denied): nothing under it is read"
        }
        assert "a100 skipped: a directory that cannot be read" in ready["warnings"][0]
        assert sorted(ready["files"]) == ["synthetic-h100.parquet", "synthetic-others.parquet"]
        assert c.get("/best", params={"B": 8, "T": 1024, "gpu": "h100"}).status_code == 200
    locked.add(store_dir)
    with ready_client(store_dir) as c:
        ready = c.get("/readyz").json()
        assert list(ready["skipped"]) == ["<results>"] and ready["files"] == []
        assert (
            "<results> skipped: a directory that cannot be read (Permission denied)" in ready["warnings"][0]
        )
        assert str(store_dir) not in json.dumps(ready)


def wait_for(predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_new_files_are_picked_up_without_a_restart(store_dir: Path) -> None:
    with ready_client(store_dir, interval=0.1) as c:
        assert c.get("/best", params={"B": 8, "T": 1024, "gpu": "a100"}).status_code == 404
        write_table([trial("a100", S1, "bf16", "vec", VEC16, 0.2)], store_dir, "synthetic-a100")
        assert wait_for(lambda: c.get("/best", params={"B": 8, "T": 1024, "gpu": "a100"}).status_code == 200)
        assert c.get("/readyz").json()["generation"] >= 2
        # a corrupt file appearing later is reported, and answers keep working
        (store_dir / "broken.parquet").write_bytes(b"not parquet")
        assert wait_for(lambda: "broken.parquet" in c.get("/readyz").json()["skipped"])
        assert c.get("/best", params={"B": 8, "T": 1024, "gpu": "a100"}).status_code == 200


def test_unchanged_directory_is_not_reloaded(store_dir: Path) -> None:
    with make_client(store_dir) as c:
        store = c.app.state.store
        assert store.wait_ready(30)
        assert store.refresh() is False
        (store_dir / "synthetic-h100.parquet").touch()
        assert store.refresh() is True and store.state.generation == 2


def test_readyz_lists_entries_that_are_not_files_with_why(store_dir: Path) -> None:
    (store_dir / "h100").mkdir()
    (store_dir / "h100" / "odd.parquet").mkdir()
    os.mkfifo(store_dir / "pipe.parquet")
    os.symlink("loop-b.parquet", store_dir / "loop-a.parquet")
    os.symlink("loop-a.parquet", store_dir / "loop-b.parquet")
    with ready_client(store_dir) as c:
        ready = c.get("/readyz").json()
        assert ready["skipped"] == {
            "h100/odd.parquet": "a directory, not a file",
            "loop-a.parquet": "a symbolic link loop, not a file",
            "loop-b.parquet": "a symbolic link loop, not a file",
            "pipe.parquet": "a FIFO, not a file: never opened",
        }
        assert "pipe.parquet skipped: a FIFO, not a file: never opened" in ready["warnings"]
        assert ready["rows"] == 11
        os.unlink(store_dir / "pipe.parquet")  # the listing changed: reloaded, no longer reported
        assert c.app.state.store.refresh() is True
        assert "pipe.parquet" not in c.get("/readyz").json()["skipped"]


def test_readyz_names_files_relative_to_the_directories_read_never_by_server_paths(
    store_dir: Path, tmp_path: Path
) -> None:
    more, gone = tmp_path / "more", tmp_path / "gone"
    write_table([trial("a100", S1, "bf16", "vec", VEC16, 0.2)], more / "a100", "run")
    (more / "half-written.parquet").write_bytes(b"PAR1\x00\x01garbage")
    store = ResultsStore(store_dir, beside=[more, gone, bundled_results_dir()], interval=30)
    with TestClient(create_app(Settings(results_dir=store_dir, reload_interval=30), store)) as c:
        assert store.wait_ready(60)
        ready = c.get("/readyz").json()
        assert ready["directories"] == ["results", "more", "gone", "bundled"]
        assert ready["missing_directories"] == ["gone"]
        assert "the gone directory does not exist: nothing is served from it" in ready["warnings"]
        files = ready["files"]
        assert files[:3] == ["synthetic-h100.parquet", "synthetic-others.parquet", "more:a100/run.parquet"]
        assert files[3:] and all(name.startswith("bundled:h200/") for name in files[3:])
        assert list(ready["skipped"]) == ["more:half-written.parquet"]
        text = json.dumps(ready)
        assert str(tmp_path) not in text and str(bundled_results_dir()) not in text
