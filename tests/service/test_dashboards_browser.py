"""The dashboards in a real headless Chromium, 1400 px wide, against a real server, checked as a
person would look at them: every chart drawn, no console errors, each reference line's label
sitting at its line (as rendered, in pixels), the winner marked in the heat map, every text at
least 11 px tall as drawn, no two numbers of a heat map on top of each other, and the overview
naming every winner above the fold. Pages are drawn from the tests' synthetic rows and from the
bundled H200 results. A page that fails a check is saved as a screenshot under a pytest
temporary directory; with REPKV_SCREENSHOTS=DIR set every page is, and copied there: those of the
bundled results are docs/dashboards/'s (REPKV_SCREENSHOTS=docs/dashboards pytest -m browser -k
bundled)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from dashboards_browser_js import (
    HEATMAP_OVERLAP_JS,
    LINES_JS,
    NAMED_WINNERS_JS,
    SETTLED_JS,
    SMALL_TEXT_JS,
    WINNER_JS,
)
from live_service import running_service
from trial_rows import S1, h100_rows, other_rows, trial

from results.store import write_table

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
REPO = Path(__file__).resolve().parents[2]
BUNDLED = REPO / "results" / "data"
VIEWPORT = {"width": 1400, "height": 1000}
MIN_FONT_PX = 11
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SHAPE = "B=8&T=1024&NH=32&NH_KV=8&HD=128"
# name: (path, charts, horizontal reference lines that must be drawn with their labels)
PAGES = {
    "overview": ("/dashboards", 3, 0),
    "shape": (f"/dashboards/shape?gpu=h100&{SHAPE}&dtype=bf16", 3, 4),
    "gpus": (f"/dashboards/gpus?{SHAPE}&dtype=bf16", 2, 0),
    "bandwidth": ("/dashboards/bandwidth?gpu=h200", 2, 2),
    "untuned": ("/dashboards/shape?gpu=h100&B=2&T=3000&dtype=bf16", 0, 0),
}
# The same pages of repkv forward (?op=): the synthetic store holds forward rows of h100 and h200
# too, beside a backward vec row of the same params that they must not show.
FORWARD_PAGES = {
    "overview": ("/dashboards?op=repkv_forward", 3, 0),
    "shape": (f"/dashboards/shape?gpu=h100&{SHAPE}&dtype=bf16&op=repkv_forward", 3, 4),
    "gpus": (f"/dashboards/gpus?{SHAPE}&dtype=bf16&op=repkv_forward", 2, 0),
    "bandwidth": ("/dashboards/bandwidth?gpu=h200&op=repkv_forward", 2, 2),
}
FORWARD_VEC = {"block": 256, "vec_bytes": 16, "load": "ldg", "store": "stcs"}
FORWARD_REPLICATE = {"block": 128, "vec_bytes": 16, "load": "plain", "store": "plain"}
# The bundled H200 results, named as the screenshots in docs/dashboards/ are.
BUNDLED_PAGES = {
    "overview": ("/dashboards", 3, 0),
    "shape-h200-B8-T1024-bf16": (f"/dashboards/shape?gpu=h200&{SHAPE}&dtype=bf16", 3, 4),
    "shape-h200-B8-T1024-fp32": (f"/dashboards/shape?gpu=h200&{SHAPE}&dtype=fp32", 3, 4),
    "gpus-B8-T1024-bf16": (f"/dashboards/gpus?{SHAPE}&dtype=bf16", 2, 0),
    "bandwidth-h200": ("/dashboards/bandwidth?gpu=h200", 2, 2),
    "untuned-h200-B2-T3000-bf16": ("/dashboards/shape?gpu=h200&B=2&T=3000&dtype=bf16", 0, 0),
}


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The service tests' synthetic rows; the h200 rows report the device name of an H200, so
    that the bandwidth page draws a known peak. No test here writes: one store and one server
    (`live_server`) serve the module."""
    directory = tmp_path_factory.mktemp("browser") / "results"
    write_table(h100_rows(), directory, "synthetic-h100")
    forward = [
        trial("h100", S1, "bf16", "naive", {"block": 128}, 0.30, op="repkv_forward", number=0),
        trial("h100", S1, "bf16", "vec", FORWARD_VEC, 0.07, op="repkv_forward", number=1),
        trial("h100", S1, "bf16", "replicate", FORWARD_REPLICATE, 0.09, op="repkv_forward", number=2),
        trial("h200", S1, "bf16", "naive", {"block": 128}, 0.20, op="repkv_forward", number=0),
        trial("h200", S1, "bf16", "replicate", FORWARD_REPLICATE, 0.06, op="repkv_forward", number=1),
    ]
    others = [{**row, "gpu_name": "NVIDIA H200"} if row["gpu"] == "h200" else row for row in other_rows()]
    forward = [{**row, "gpu_name": "NVIDIA H200"} if row["gpu"] == "h200" else row for row in forward]
    write_table(others, directory, "synthetic-others")
    write_table(forward, directory, "synthetic-forward")
    return directory


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def tab(browser):
    """One tab for every page of the module, and the console errors of the page it shows. A new
    page in the same tab runs plotly.js from the renderer's compiled code, not parsed afresh:
    about 0.2 s a page, where a new tab takes 2-3 s on two cores."""
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page, errors
    context.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    directory = tmp_path_factory.mktemp("screenshots")
    yield directory
    target = os.environ.get("REPKV_SCREENSHOTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        for png in directory.glob("*.png"):
            shutil.copy2(png, Path(target) / png.name)


@pytest.fixture(scope="module")
def live_server(store_dir: Path) -> Iterator[str]:
    """The service serving the synthetic store, once for the module."""
    with running_service(store_dir) as url:
        yield url


@pytest.fixture(scope="module")
def bundled_server() -> Iterator[str]:
    """The service serving the bundled results (results/data) alone."""
    if not any(BUNDLED.rglob("*.parquet")):
        pytest.skip(f"no bundled results under {BUNDLED}")
    with running_service(BUNDLED) as url:
        yield url


def open_page(tab, url: str, charts: int):
    """Shows url in the tab (its errors so far forgotten) once its charts are drawn."""
    page, errors = tab
    errors.clear()
    response = page.goto(url, wait_until="networkidle")
    assert response is not None and response.status == 200
    if charts:
        page.wait_for_function(
            f"document.querySelectorAll('.js-plotly-plot svg.main-svg').length >= {charts}", timeout=30_000
        )
        page.evaluate(SETTLED_JS)
    return page, errors


@pytest.mark.parametrize("name", list(PAGES))
def test_page_reads_as_it_should(tab, live_server: str, shots: Path, name: str) -> None:
    check_page(tab, live_server, shots, name, PAGES[name], name)


@pytest.mark.parametrize("name", list(FORWARD_PAGES))
def test_forward_page_reads_as_it_should(tab, live_server: str, shots: Path, name: str) -> None:
    check_page(tab, live_server, shots, f"forward-{name}", FORWARD_PAGES[name], name)


@pytest.mark.parametrize("name", list(BUNDLED_PAGES))
def test_bundled_page_reads_as_it_should(tab, bundled_server: str, shots: Path, name: str) -> None:
    check_page(tab, bundled_server, shots, name, BUNDLED_PAGES[name], name.split("-")[0])


def check_page(tab, server: str, shots: Path, name: str, spec: tuple[str, int, int], kind: str) -> None:
    path, charts, lines = spec
    page, errors = open_page(tab, server + path, charts)
    try:
        check_drawn(page, errors, charts, lines, kind)
    except BaseException:
        page.screenshot(path=str(shots / f"{name}.png"), full_page=True)  # what failed, as drawn
        raise
    else:
        if os.environ.get("REPKV_SCREENSHOTS"):
            page.screenshot(path=str(shots / f"{name}.png"), full_page=True)


def check_drawn(page, errors: list[str], charts: int, lines: int, kind: str) -> None:
    plots = page.locator(".js-plotly-plot")
    assert plots.count() == charts
    for i in range(charts):
        assert plots.nth(i).locator("svg.main-svg").count() >= 1
    if charts:
        assert page.locator(".js-plotly-plot .trace, .js-plotly-plot .hm, .js-plotly-plot image").count() > 0

    labelled = [line for i in range(charts) for line in plots.nth(i).evaluate(LINES_JS)]
    assert len(labelled) == lines, labelled
    for line in labelled:
        # The line crosses the plot, and its label sits just above it, inside the plot.
        assert line["plotTop"] - 1 <= line["lineY"] <= line["plotBottom"] + 1, line
        assert line["labelBottom"] - 6 <= line["lineY"] <= line["labelBottom"] + 3, line
        assert line["plotLeft"] <= line["labelLeft"] and line["labelRight"] <= line["plotRight"] + 2, line

    for i in range(charts):
        small = plots.nth(i).evaluate(SMALL_TEXT_JS, MIN_FONT_PX)
        assert small == [], f"chart {i}: text under {MIN_FONT_PX} px: {small[:5]}"
        heat = plots.nth(i).evaluate(HEATMAP_OVERLAP_JS)
        assert heat["overlaps"] == [], f"chart {i}: heat-map numbers overlap: {heat['overlaps']}"
    if kind == "overview":
        check_winners_named_above_the_fold(page, plots.nth(0))
    if kind == "shape":
        winner = plots.nth(0).evaluate(WINNER_JS)
        assert winner is not None, "the heat map has no winner marker"
        assert winner["cell"] is not None, winner  # on a measured cell
        # the configuration the page names the winner (whose cell need not hold the lowest time)
        named = page.locator(".summary.winner code").first.inner_text()
        assert winner["markerY"].split()[0] == named.split("[")[0], (winner, named)
        assert winner["drawn"] == 1
    if kind == "untuned":
        served = page.locator(".summary.served")
        assert served.count() == 1 and "GET /best serves" in served.inner_text()
        assert page.locator(".summary.served a.recipe").count() == 1
    assert errors == []


def check_winners_named_above_the_fold(page, board) -> None:
    """The overview's first chart names the winning family of every GPU, shape and dtype of the
    winners table, each drawn inside the first screen (no scrolling, no hovering)."""
    table = page.locator("table.winners").first.locator("tbody tr td:nth-child(4) code")
    expected = sorted(key.split("[")[0] for key in table.all_inner_texts())
    named = board.evaluate(NAMED_WINNERS_JS)
    assert expected and sorted(n["text"] for n in named) == expected
    below = [n for n in named if n["top"] < 0 or n["bottom"] > VIEWPORT["height"]]
    assert below == [], f"{len(below)} winners are named below the fold, e.g. {below[:3]}"


def test_pickers_reload_the_page_with_the_query_changed(tab, live_server: str) -> None:
    page, errors = open_page(tab, f"{live_server}/dashboards/shape?gpu=h100&{SHAPE}&dtype=bf16", 3)
    with page.expect_navigation():
        page.select_option('select[data-picker="dtype"]', label="fp32")
    assert "dtype=fp32" in page.url and "gpu=h100" in page.url and "B=8" in page.url
    page.wait_for_function("document.querySelectorAll('.js-plotly-plot svg.main-svg').length >= 3")
    with page.expect_navigation():
        page.select_option('select[data-picker="gpu"]', label="h200")
    assert "gpu=h200" in page.url and "dtype=fp32" in page.url
    assert page.locator("h1").inner_text().endswith("not tuned")  # h200 has no fp32 rows
    assert page.locator(".summary.served .note").inner_text().startswith("How this rule has done")
    assert errors == []


def test_the_op_picker_reloads_the_page_on_that_op(tab, live_server: str) -> None:
    page, errors = open_page(tab, f"{live_server}/dashboards/shape?gpu=h100&{SHAPE}&dtype=bf16", 3)
    assert page.locator('select[data-picker="op"] option').all_inner_texts()[0] == "repkv_backward"
    with page.expect_navigation():
        page.select_option('select[data-picker="op"]', label="repkv_forward")
    assert "op=repkv_forward" in page.url and "gpu=h100" in page.url and "B=8" in page.url
    page.wait_for_function("document.querySelectorAll('.js-plotly-plot svg.main-svg').length >= 3")
    assert page.locator("h1").inner_text().endswith("(repkv_forward)")
    assert "3 trials" in page.locator(".summary.winner").inner_text()
    with page.expect_navigation():  # an op nobody tuned: one line, no chart
        page.select_option('select[data-picker="op"]', label="repkv_rope_backward (no results)")
    assert "python -m tuner --op repkv_rope_backward" in page.locator("p.untuned").inner_text()
    assert page.locator(".js-plotly-plot").count() == 0
    assert errors == []


def test_chromium_is_the_system_one() -> None:
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM}")
    assert shutil.which("chromium") is not None


@pytest.mark.parametrize("path", ["/docs", "/redoc"])
def test_the_api_pages_render_and_ask_nothing_of_another_host(tab, live_server: str, path: str) -> None:
    """Offline, ReDoc's logo request to its CDN failed with a console error."""
    page, errors = tab
    elsewhere: list[str] = []

    def note(request) -> None:
        if not request.url.startswith((live_server, "data:", f"blob:{live_server}")):
            elsewhere.append(request.url)

    page.on("request", note)
    try:
        page, errors = open_page(tab, live_server + path, charts=0)
        page.wait_for_selector(".swagger-ui .info, .api-info", timeout=30_000)
        assert "/best" in page.content()
    finally:
        page.remove_listener("request", note)
    assert not elsewhere and not errors, (elsewhere, errors)
