"""GET /best on a store with nothing to serve for the op asked: the 404 says why as the store
has it (a results file it could not read, the rows of another op that it holds instead), never
that the directory is simply empty or that another GPU's results would answer."""

from __future__ import annotations

import os
from pathlib import Path

from service_client import ready_client
from trial_rows import S1, VEC16, trial

from results.store import write_table

FORWARD = "repkv_forward"
FORWARD_VEC = {"block": 256, "vec_bytes": 16, "load": "ldg", "store": "stcs"}


def test_a_corrupt_and_an_empty_file_are_named_as_unread(tmp_path: Path) -> None:
    (tmp_path / "h100").mkdir()
    write_table([trial("h100", S1, "bf16", "vec", VEC16, 0.1)], tmp_path / "h100", "good")
    good = next((tmp_path / "h100").glob("*.parquet"))
    (tmp_path / "h100" / "corrupt.parquet").write_bytes(good.read_bytes()[:200])
    (tmp_path / "h100" / "empty.parquet").write_bytes(b"")
    good.unlink()
    with ready_client(tmp_path) as client:
        for params in ({}, {"gpu": "h100"}):
            r = client.get("/best", params={"B": 8, "T": 1024, **params})
            assert r.status_code == 404
            detail = r.json()["detail"]
            assert "2 results files or directories could not be read (see /readyz)" in detail, detail
            assert "other_gpus" not in detail


def test_a_store_of_another_op_names_it(tmp_path: Path) -> None:
    write_table([trial("h200", S1, "bf16", "vec", FORWARD_VEC, 0.07, op=FORWARD)], tmp_path, "forward")
    with ready_client(tmp_path) as client:
        assert client.get("/best", params={"B": 8, "T": 1024, "op": FORWARD}).status_code == 200
        for params in ({}, {"gpu": "h200"}):
            r = client.get("/best", params={"B": 8, "T": 1024, **params})
            assert r.status_code == 404
            detail = r.json()["detail"]
            assert detail == (
                "no results of repkv_backward are loaded: tune it with `python -m tuner --op "
                "repkv_backward`; the results hold repkv_forward (ask with op=repkv_forward)"
            ), detail


def test_a_results_directory_that_cannot_be_listed_is_named(tmp_path: Path, monkeypatch) -> None:
    """As for a user without permission (the tests may run as root, where chmod keeps no one out)."""
    write_table([trial("h100", S1, "bf16", "vec", VEC16, 0.1)], tmp_path, "good")
    listing = os.scandir

    def scandir(path="."):
        if Path(path) == tmp_path:
            raise PermissionError(13, "Permission denied", str(path))
        return listing(path)

    monkeypatch.setattr(os, "scandir", scandir)
    with ready_client(tmp_path) as client:
        r = client.get("/best", params={"B": 8, "T": 1024})
        assert r.status_code == 404
        assert r.json()["detail"].endswith("; 1 results file or directory could not be read (see /readyz)")
