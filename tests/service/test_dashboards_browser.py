"""The dashboards in a real headless Chromium against a real server: every page draws its
plotly charts with no console errors. Screenshots land in artifacts/screenshots/."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import REPO

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PAGES = {
    "overview": ("/dashboards", 2),
    "shape": ("/dashboards/shape?gpu=h100&B=8&T=1024&NH=32&NH_KV=8&HD=128&dtype=bf16", 3),
    "gpus": ("/dashboards/gpus?B=8&T=1024&NH=32&NH_KV=8&HD=128&dtype=bf16", 2),
}


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        yield browser
        browser.close()


@pytest.mark.parametrize("name", list(PAGES))
def test_page_draws_its_charts(browser, live_server: str, name: str) -> None:
    path, charts = PAGES[name]
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    response = page.goto(live_server + path, wait_until="networkidle")
    assert response is not None and response.status == 200
    page.wait_for_function(
        f"document.querySelectorAll('.js-plotly-plot svg.main-svg').length >= {charts}", timeout=30_000
    )
    plots = page.locator(".js-plotly-plot")
    assert plots.count() == charts
    for i in range(charts):
        assert plots.nth(i).locator("svg.main-svg").count() >= 1
    assert page.locator(".js-plotly-plot .trace, .js-plotly-plot .hm, .js-plotly-plot image").count() > 0
    assert errors == []
    shots = REPO / "artifacts" / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shots / f"{name}.png"), full_page=True)
    page.close()


def test_chromium_is_the_system_one() -> None:
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM}")
    assert shutil.which("chromium") is not None
