from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

import variants


def test_current_sources_are_served_by_hash(client: TestClient) -> None:
    for family in variants.FAMILIES.values():
        r = client.get(f"/kernels/{family.source_hash}")
        assert r.status_code == 200 and r.text == family.source
        assert r.headers["content-type"].startswith("text/plain")


def test_unknown_hash_is_404_listing_the_current_ones(client: TestClient) -> None:
    r = client.get("/kernels/0123456789abcdef")
    assert r.status_code == 404 and len(r.json()["available"]) == len(variants.FAMILIES)


@pytest.mark.parametrize("bad", ["xyz", "0123456789ABCDEF", "0123456789abcdef0", "..%2F..%2Fetc", "g" * 16])
def test_malformed_hash_is_rejected(client: TestClient, bad: str) -> None:
    assert client.get(f"/kernels/{bad}").status_code in (404, 422)
