"""The dashboard pages are drawn once per store generation (service.api.middleware.PageCache)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from service_client import ready_client
from trial_rows import S1, VEC16, trial

from results.store import write_table
from service.api.middleware import PageCache
from service.dashboards import data

SHAPE_PAGE = "/dashboards/shape?gpu=h100&B=8&T=1024&NH=32&NH_KV=8&HD=128&dtype=bf16"


@pytest.fixture
def client(store_dir: Path) -> Iterator[TestClient]:
    """An app of the test's own: these tests watch its page cache from empty, and reload it."""
    with ready_client(store_dir) as c:
        yield c


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> Counter:
    """How often the overview's data was made (the route calls `data.overview`)."""
    counts: Counter = Counter()
    original = data.overview

    def counted(*args, **kwargs):
        counts["overview"] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(data, "overview", counted)
    return counts


def test_a_page_asked_again_is_sent_as_drawn_until_the_store_reloads(
    client: TestClient, store_dir: Path, drawn: Counter
) -> None:
    first = client.get("/dashboards")
    assert first.status_code == 200 and drawn["overview"] > 0
    draws = drawn["overview"]
    again = client.get("/dashboards")
    assert again.status_code == 200 and again.text == first.text
    assert again.headers["content-type"] == first.headers["content-type"]
    assert drawn["overview"] == draws  # not drawn again
    assert client.get("/dashboards", params={"dtype": "fp32"}).status_code == 200
    assert drawn["overview"] > draws  # another query is another page

    # a new file: the store reloads (generation 2) and the page is drawn from it
    write_table([trial("h200", S1, "fp16", "vec", VEC16, 0.05, number=0)], store_dir, "synthetic-new")
    assert client.app.state.store.refresh(force=True)
    draws = drawn["overview"]
    after = client.get("/dashboards")
    assert drawn["overview"] > draws and after.text.count("fp16") > first.text.count("fp16")


def test_head_and_errors_are_never_kept(client: TestClient) -> None:
    assert client.head(SHAPE_PAGE).status_code == 200
    page = client.get(SHAPE_PAGE)
    assert page.status_code == 200 and "<html" in page.text.lower()  # a HEAD left no empty page
    missing = "/dashboards/shape?gpu=nope&B=8&T=1024&dtype=bf16"
    assert client.get(missing).status_code == 404
    assert client.get(missing).status_code == 404
    cache = _page_cache(client)
    assert [key[1:] for key in cache.pages] == [("/dashboards/shape", SHAPE_PAGE.split("?")[1].encode())]


def test_only_the_pages_asked_for_last_are_kept(client: TestClient) -> None:
    cache = _page_cache(client)
    cache.max_pages = 2
    for dtype in ("bf16", "fp32", "fp16"):
        assert client.get("/dashboards", params={"dtype": dtype}).status_code == 200
    assert [key[2] for key in cache.pages] == [b"dtype=fp32", b"dtype=fp16"]


def _page_cache(client: TestClient) -> PageCache:
    app = client.app.middleware_stack
    while not isinstance(app, PageCache):
        app = app.app
    return app
