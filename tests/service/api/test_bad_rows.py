"""Rows no tuner of this version writes (by hand, an old version, a broken tool) are dropped
when their file is loaded, and /readyz says which and why; the service never answers 500
because of them, nor serves them."""

from __future__ import annotations

import logging
import math
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from service_client import make_client, ready_client
from trial_rows import S1, SPLIT16, VEC16, WPH, trial, write_unchecked

from results.store import write_table


def bad(config: tuple[str, dict] = ("warp_per_head", WPH), **fields) -> dict:
    """A synthetic h100 row of `config` at 0.05 ms, then `fields` written over it."""
    row = trial("h100", S1, "bf16", *config, 0.05)
    row.update(fields)
    return row


def client_with(store_dir: Path, rows: list[dict], name: str = "hand-written") -> TestClient:
    write_unchecked(rows, store_dir, name)
    return make_client(store_dir)


@pytest.mark.parametrize("time_ms", [0.0, -1.0, 5e-324, math.nan, math.inf])
def test_an_impossible_ok_time_is_never_served(store_dir: Path, time_ms: float) -> None:
    with client_with(store_dir, [bad(time_ms=time_ms)]) as c:
        assert c.app.state.store.wait_ready(30)
        r = c.get("/best", params={"B": 8, "T": 1024, "gpu": "h100"})
        assert r.status_code == 200, r.text
        assert r.json()["answers"][0]["kernel"]["family"] == "split"  # the real winner
        assert c.get("/shapes").status_code == 200
        assert c.get("/best", params={"B": 8, "T": 1024}).status_code == 200
        ready = c.get("/readyz").json()
        assert ready["dropped_rows"] == 1
        assert list(ready["dropped"]) == ["hand-written.parquet"]
        assert any("hand-written.parquet: 1 rows dropped" in w for w in ready["warnings"])


def test_a_time_faster_than_any_memory_is_dropped(store_dir: Path) -> None:
    # 302 MB at 100 TB/s take 3 us: 1 us is impossible, 10 us is merely very fast
    with client_with(store_dir, [bad(time_ms=0.001), bad(("vec", VEC16), time_ms=0.01)]) as c:
        assert c.app.state.store.wait_ready(30)
        reasons = c.get("/readyz").json()["dropped"]["hand-written.parquet"]
        assert len(reasons) == 1 and "100 TB/s" in next(iter(reasons))
        body = c.get("/best", params={"B": 8, "T": 1024, "gpu": "h100"}).json()
        assert body["answers"][0]["measured"]["time_ms"] == pytest.approx(0.01)


@pytest.mark.parametrize("column", ["gpu", "dtype"])
def test_a_null_gpu_or_dtype_breaks_no_dashboard(store_dir: Path, column: str) -> None:
    with client_with(store_dir, [bad(**{column: None})]) as c:
        assert c.app.state.store.wait_ready(30)
        assert c.get("/dashboards").status_code == 200
        assert c.get("/dashboards/gpus", params={"B": 8, "T": 1024}).status_code == 200
        assert c.get("/gpus").status_code == 200
        reasons = c.get("/readyz").json()["dropped"]["hand-written.parquet"]
        assert reasons == {f"{column} is null or empty": 1}


def test_a_null_family_breaks_no_shape_page(store_dir: Path) -> None:
    with client_with(store_dir, [bad(family=None)]) as c:
        assert c.app.state.store.wait_ready(30)
        r = c.get("/dashboards/shape", params={"gpu": "h100", "B": 8, "T": 1024})
        assert r.status_code == 200, r.text[:500]
        assert c.get("/readyz").json()["dropped"] == {"hand-written.parquet": {"family is null or empty": 1}}


def test_unknown_names_and_shapes_are_dropped_with_counts(store_dir: Path) -> None:
    rows = [
        bad(status="fine"),
        bad(status="fine"),
        bad(family="gone"),
        bad(dtype="int8"),
        bad(NH=30),
        bad(B=0),
        bad(("split", SPLIT16), time_ms=0.08),  # a good row in the same file
    ]
    with client_with(store_dir, rows) as c:
        assert c.app.state.store.wait_ready(30)
        ready = c.get("/readyz").json()
        reasons = ready["dropped"]["hand-written.parquet"]
        assert sum(reasons.values()) == 6 and ready["dropped_rows"] == 6
        status = next(why for why in reasons if why.startswith("status"))
        assert reasons[status] == 2 and "'fine'" in status and "wrong_result" in status
        assert any(why.startswith("family") and "'gone'" in why for why in reasons)
        assert any(why.startswith("dtype") and "'int8'" in why for why in reasons)
        shape = next(why for why in reasons if "shape" in why)
        assert reasons[shape] == 2
        assert ready["rows"] == 12  # 11 good rows of the fixtures and the good one here
        body = c.get("/best", params={"B": 8, "T": 1024, "gpu": "h100"}).json()
        assert body["answers"][0]["measured"]["time_ms"] == pytest.approx(0.08)


def test_a_file_corrupted_in_place_keeps_its_last_good_copy(store_dir: Path) -> None:
    path = write_table([trial("a100", S1, "bf16", "vec", VEC16, 0.2)], store_dir, "synthetic-a100")
    with make_client(store_dir) as c:
        store = c.app.state.store
        assert store.wait_ready(30)
        params = {"B": 8, "T": 1024, "gpu": "a100"}
        assert c.get("/best", params=params).status_code == 200

        path.write_bytes(b"PAR1 overwritten by a broken tool")
        assert store.refresh() is True
        assert c.get("/best", params=params).json()["answers"][0]["measured"]["time_ms"] == 0.2
        ready = c.get("/readyz").json()
        assert "synthetic-a100.parquet" in ready["skipped"]
        assert "last good copy" in ready["stale"]["synthetic-a100.parquet"]
        assert any("synthetic-a100.parquet: unreadable" in w for w in ready["warnings"])
        assert "synthetic-a100.parquet" in ready["files"]

        # rewritten in place with nothing but bad rows: still the last good copy
        write_unchecked([bad(gpu="a100", time_ms=0.0)], store_dir, "synthetic-a100")
        assert store.refresh() is True
        assert c.get("/best", params=params).status_code == 200
        assert "fails validation" in c.get("/readyz").json()["stale"]["synthetic-a100.parquet"]

        # fixed: the new rows are served, nothing is stale
        write_table([trial("a100", S1, "bf16", "vec", VEC16, 0.3)], store_dir, "synthetic-a100")
        assert store.refresh() is True
        assert c.get("/best", params=params).json()["answers"][0]["measured"]["time_ms"] == 0.3
        assert c.get("/readyz").json()["stale"] == {}

        # removed: gone for good
        path.unlink()
        assert store.refresh() is True
        assert c.get("/best", params=params).status_code == 404


def test_a_new_corrupt_file_has_no_good_copy_to_serve(store_dir: Path) -> None:
    (store_dir / "broken.parquet").write_bytes(b"not parquet")
    with ready_client(store_dir) as c:
        ready = c.get("/readyz").json()
        assert "broken.parquet" in ready["skipped"] and ready["stale"] == {}
        assert "broken.parquet" not in ready["files"]


def test_only_changed_files_are_read_again(store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from service import live_store

    read: list[str] = []
    real = live_store.load_file
    monkeypatch.setattr(
        live_store, "load_file", lambda path, families=None: read.append(path.name) or real(path)
    )
    with make_client(store_dir) as c:
        store = c.app.state.store
        assert store.wait_ready(30)
        assert sorted(read) == ["synthetic-h100.parquet", "synthetic-others.parquet"]
        read.clear()
        write_table([trial("a100", S1, "bf16", "vec", VEC16, 0.2)], store_dir, "synthetic-a100")
        assert store.refresh() is True and read == ["synthetic-a100.parquet"]
        assert c.get("/readyz").json()["rows"] == 12


def test_a_missing_results_directory_is_said_in_readyz_and_the_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    missing = tmp_path / "not-there"
    with caplog.at_level(logging.WARNING, logger="service"), make_client(missing) as c:
        assert c.app.state.store.wait_ready(30)
        ready = c.get("/readyz").json()
        assert ready["ready"] is True and ready["missing_directories"] == ["results"]
        assert "the results directory does not exist: nothing is served from it" in ready["warnings"]
        assert str(tmp_path) not in str(ready)  # the server's paths stay in its log
        assert f"results directory {missing} does not exist" in caplog.text
        missing.mkdir()
        c.app.state.store.refresh()
        assert c.get("/readyz").json()["missing_directories"] == []


def test_python_m_service_logs_a_missing_results_directory(tmp_path: Path) -> None:
    from live_service import free_port
    from service_client import REPO

    missing, port = tmp_path / "nowhere", free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "service", "--results-dir", str(missing), "--no-bundled", "--port", str(port)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1)
                if ready.status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        assert ready.json()["missing_directories"] == ["results"]
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=10)
    assert f"WARNING:  results directory {missing} does not exist" in out, out


def test_a_row_with_corrupt_params_does_not_hide_the_real_winner(store_dir: Path) -> None:
    """split (0.09 ms) wins h100's S1; a faster ok row under split's config_key with broken
    params used to stand for split when rows were de-duplicated by key, and then, unusable,
    took split away: vec, the runner-up, was served."""
    corrupt = bad(("split", SPLIT16), params='{"block": 512, "items":', time_ms=0.05)
    with client_with(store_dir, [corrupt]) as c:
        assert c.app.state.store.wait_ready(30)
        body = c.get("/best", params={"B": 8, "T": 1024, "gpu": "h100"}).json()
        assert body["answers"][0]["kernel"]["family"] == "split"
        assert body["answers"][0]["measured"]["time_ms"] == pytest.approx(0.09)
        ready = c.get("/readyz").json()
        assert ready["dropped"]["hand-written.parquet"] == {
            'params is not a JSON object (e.g. \'{"block": 512, "items":\')': 1
        }


def test_a_time_six_times_the_devices_own_peak_is_dropped(store_dir: Path) -> None:
    """302 MB in 15 us is 20 TB/s: six times an H100's 3.35 TB/s, yet under the old fixed
    floor of 100 TB/s, so it won."""
    with client_with(store_dir, [bad(("vec", VEC16), gpu_name="NVIDIA H100 80GB HBM3", time_ms=0.015)]) as c:
        assert c.app.state.store.wait_ready(30)
        body = c.get("/best", params={"B": 8, "T": 1024, "gpu": "h100"}).json()
        assert body["answers"][0]["measured"]["time_ms"] == pytest.approx(0.09)
        (why,) = c.get("/readyz").json()["dropped"]["hand-written.parquet"]
        assert "3x the device's peak bandwidth" in why


def test_a_gpu_label_that_is_a_path_is_dropped_and_never_listed(store_dir: Path) -> None:
    with client_with(store_dir, [bad(gpu="../../x")]) as c:
        assert c.app.state.store.wait_ready(30)
        assert "../../x" not in [g["label"] for g in c.get("/gpus").json()]
        r = c.get("/best", params={"B": 8, "T": 1024, "gpu": "../../x"})  # the query is held to it too
        assert r.status_code == 422 and "GPU label '../../x' must be" in r.json()["detail"][0]["msg"]
        (why,) = c.get("/readyz").json()["dropped"]["hand-written.parquet"]
        assert why.startswith("gpu is not a GPU label") and "'../../x'" in why


def test_a_copied_file_and_a_row_written_twice_are_counted_once(store_dir: Path) -> None:
    with ready_client(store_dir) as c:
        before = {path: c.get(path).json() for path in ("/gpus", "/shapes", "/results")}
    shutil.copyfile(store_dir / "synthetic-h100.parquet", store_dir / "copy-of-h100.parquet")
    row = trial("h100", S1, "bf16", "vec", VEC16, 0.5, number=30)
    write_unchecked([row, row], store_dir, "twice")
    with ready_client(store_dir) as c:
        gpus = {g["label"]: g["trials"] for g in c.get("/gpus").json()}
        assert gpus == {g["label"]: g["trials"] + (g["label"] == "h100") for g in before["/gpus"]}
        shapes = c.get("/shapes").json()
        assert sum(s["trials"] for s in shapes) == sum(s["trials"] for s in before["/shapes"]) + 1
        assert c.get("/results").json()["total"] == before["/results"]["total"] + 1 == 12
        ready = c.get("/readyz").json()
        assert ready["rows"] == 12 and len(ready["files"]) == 4
        assert (
            "9 rows were read more than once (the same trial in two files): counted once" in ready["warnings"]
        )
