from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

import variants


def test_current_sources_are_served_by_hash(client: TestClient) -> None:
    for op in variants.OPS.values():  # every op's: /best links its answer's source here
        for family in op.families.values():
            r = client.get(f"/kernels/{family.source_hash}")
            assert r.status_code == 200 and r.text == family.source, (op.name, family.name)
            assert r.headers["content-type"].startswith("text/plain")
            owner = family.template_of or family.name  # warp_sum_runtime: warp_sum's template
            assert (r.headers["x-kernel-op"], r.headers["x-kernel-family"]) == (op.name, owner)


def test_unknown_hash_is_404_listing_the_current_ones(client: TestClient) -> None:
    r = client.get("/kernels/0123456789abcdef")
    every = sum(len({f.template_path for f in op.families.values()}) for op in variants.OPS.values())
    assert r.status_code == 404 and len(r.json()["available"]) == every


def test_an_upper_case_hash_names_the_same_source(client: TestClient) -> None:
    family = variants.get_op().families["vec"]
    r = client.get(f"/kernels/{family.source_hash.upper()}")
    assert r.status_code == 200 and r.text == family.source and r.headers["etag"] == f'"{family.source_hash}"'
    assert client.get("/kernels/0123456789ABCDEF").status_code == 404  # well formed, not a source


@pytest.mark.parametrize("bad", ["xyz", "0123456789abcdef0", "..%2F..%2Fetc", "g" * 16])
def test_malformed_hash_is_rejected(client: TestClient, bad: str) -> None:
    assert client.get(f"/kernels/{bad}").status_code in (404, 422)
