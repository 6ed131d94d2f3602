"""Dashboard pages (HTML with plotly charts) and the plotly.js they load, served locally."""

from __future__ import annotations

import html
from importlib import resources
from pathlib import Path
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Query
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse

from results.index import StoreIndex
from service.api.deps import DTypeDep, IndexDep, ShapeDep
from service.api.models import ErrorBody
from service.dashboards import data, draw, pages
from variants import Shape

router = APIRouter(tags=["dashboards"])

PLOTLY_JS = Path(str(resources.files("plotly") / "package_data" / "plotly.min.js"))
HTML_RESPONSES: dict[int | str, dict] = {
    200: {"content": {"text/html": {"schema": {"type": "string"}}}, "description": "an HTML page"},
    404: {"content": {"text/html": {"schema": {"type": "string"}}}, "description": "nothing to show"},
    503: {"model": ErrorBody, "description": "the results are still loading"},
}


def _shape_query(shape: Shape, dtype: str) -> dict[str, object]:
    return {**shape.as_dict(), "dtype": dtype}


def _tuned_links(index: StoreIndex, gpu: str | None = None) -> list[tuple[str, str]]:
    links = []
    for group in index.groups.values():
        if gpu is None or group.gpu == gpu:
            query = urlencode({"gpu": group.gpu, **_shape_query(group.shape, group.dtype.name)})
            links.append((f"{group.gpu} {group.shape} {group.dtype.name}", f"/dashboards/shape?{query}"))
    return links[:200]


@router.get("/", include_in_schema=False)
async def root() -> RedirectResponse:
    return RedirectResponse("/dashboards")


@router.get("/static/plotly.min.js", include_in_schema=False)
async def plotly_js() -> FileResponse:
    return FileResponse(
        PLOTLY_JS, media_type="text/javascript", headers={"Cache-Control": "public, max-age=86400"}
    )


@router.get("/dashboards", responses=HTML_RESPONSES, summary="Overview")
def overview(index: IndexDep) -> HTMLResponse:
    """Every GPU x shape x dtype with its winner, time, fraction of the copy and speed-up."""
    table = data.overview(index.frame)
    note = (
        '<p class="note">Times are medians of the winning trial; "time / copy" divides by a '
        "device-to-device copy of the same bytes timed in the same process.</p>"
    )
    body = pages.overview_table(table) + note
    return HTMLResponse(
        pages.page("Tuned configurations", body, [draw.overview_ratio(table), draw.overview_speedup(table)])
    )


@router.get("/dashboards/shape", responses=HTML_RESPONSES, summary="One shape")
def shape_page(
    index: IndexDep,
    shape: ShapeDep,
    dtype: DTypeDep,
    gpu: Annotated[str, Query(min_length=1, max_length=64, description="GPU label")],
) -> HTMLResponse:
    """One GPU, shape and dtype: variant x block-size heat map, every trial, search convergence."""
    title = f"{gpu} {shape} {dtype.name}"
    trials = data.shape_trials(index.frame, gpu, shape, dtype.name)
    if trials.empty:
        return HTMLResponse(
            pages.not_found(
                title, "No trials of this GPU, shape and dtype. Tuned ones:", _tuned_links(index)
            ),
            status_code=404,
        )
    refs = data.reference_times(trials)
    compare = "/dashboards/gpus?" + urlencode(_shape_query(shape, dtype.name))
    ok = int((trials["status"] == "ok").sum())
    body = (
        f"<p>{len(trials)} trials, {ok} correct. "
        f'<a href="{html.escape(compare)}">This shape on every GPU</a></p>'
    )
    figures = [
        draw.heatmap(data.heatmap(trials)),
        draw.trials_scatter(data.scatter(trials), refs["baseline_ms"]),
        draw.convergence(data.convergence(trials), refs["baseline_ms"], refs["copy_ms"]),
    ]
    return HTMLResponse(pages.page(title, body, figures))


@router.get("/dashboards/gpus", responses=HTML_RESPONSES, summary="GPUs compared")
def gpus_page(index: IndexDep, shape: ShapeDep, dtype: DTypeDep) -> HTMLResponse:
    """The same shape and dtype on every GPU, side by side."""
    title = f"{shape} {dtype.name} on every GPU"
    winners = data.gpu_comparison(index.frame, shape, dtype.name)
    if winners.empty:
        return HTMLResponse(
            pages.not_found(
                title, "No GPU has results for this shape and dtype. Tuned ones:", _tuned_links(index)
            ),
            status_code=404,
        )
    table = pages.overview_table(winners)
    figures = [draw.gpu_winners(winners), draw.gpu_families(data.family_best(index.frame, shape, dtype.name))]
    return HTMLResponse(pages.page(title, table, figures))
