"""Dashboard pages (HTML with plotly charts) and the plotly.js they load, served locally."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import pandas as pd
from fastapi import APIRouter, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from fastapi.routing import APIRoute

import variants
from results.best import timed_as_served
from results.index import StoreIndex, shape_tuple
from results.schema import DEFAULT_HOLD_US, L2_FED, Status
from service.api.deps import DTypeDep, DTypeFilter, GpuQuery, IndexDep, ShapeDep
from service.api.models import ErrorBody
from service.dashboards import data, draw, pages
from service.dashboards.pages import e, link
from variants import DType, Shape


def error_page(status_code: int, problems: Sequence[Any]) -> HTMLResponse:
    """The HTML page of a dashboard request with a bad query parameter: each problem (FastAPI's
    validation errors, or a message) on a line, with the status a JSON client would get."""
    items = []
    for problem in problems:
        if isinstance(problem, dict):
            where = ".".join(str(part) for part in problem.get("loc", ())[1:]) or "request"
            items.append(f"<li><code>{e(where)}</code>: {e(problem.get('msg', ''))}</li>")
        else:
            items.append(f"<li>{e(problem)}</li>")
    body = (
        f"<p>This page cannot be shown for these parameters:</p><ul>{''.join(items)}</ul>"
        f"<p>{link('Every tuned configuration', pages.overview_url())}</p>"
    )
    return HTMLResponse(pages.page("Invalid request", body), status_code=status_code)


class HtmlErrorRoute(APIRoute):
    """A dashboard route: a bad query parameter (FastAPI's validation, or a 422 a dependency
    raises) is answered with `error_page`, not JSON; a browser shows it."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            try:
                return await handler(request)
            except RequestValidationError as exc:
                return error_page(422, exc.errors())
            except HTTPException as exc:
                if exc.status_code != 422:
                    raise
                detail = exc.detail
                return error_page(422, detail if isinstance(detail, list) else [detail])

        return route


router = APIRouter(tags=["dashboards"], route_class=HtmlErrorRoute)

# How the copy is timed (results.schema.COPY_FASTEST), and how it was before.
COPY_NOTE = (
    "The copy is the faster of cudaMemcpyAsync and a 16-byte copy kernel; rows timed before "
    "that (no copy_method) held to cudaMemcpyAsync alone, which on an H200 took up to 1.35x "
    "the kernel's time at odd byte counts, so their ratio reads low there."
)
PLOTLY_JS = Path(str(resources.files("plotly") / "package_data" / "plotly.min.js"))
HTML_RESPONSES: dict[int | str, dict] = {
    200: {"content": {"text/html": {"schema": {"type": "string"}}}, "description": "an HTML page"},
    404: {"content": {"text/html": {"schema": {"type": "string"}}}, "description": "nothing to show"},
    422: {
        "content": {"text/html": {"schema": {"type": "string"}}},
        "description": "a query parameter is invalid: an HTML page naming it",
    },
    503: {"model": ErrorBody, "description": "the results are still loading"},
}


def _tuned_links(index: StoreIndex, gpu: str | None = None) -> list[tuple[str, str]]:
    links = []
    for group in index.groups.values():
        if gpu is None or group.gpu == gpu:
            links.append(
                (
                    f"{group.gpu} {group.shape} {group.dtype.name}",
                    pages.shape_url(group.gpu, group.shape, group.dtype.name),
                )
            )
    return links[:200]


def _html(text: str, status_code: int = 200) -> HTMLResponse:
    return HTMLResponse(text, status_code=status_code)


def _no_gpu(index: StoreIndex, title: str, gpu: str) -> HTMLResponse:
    gpus = index.available_gpus()
    if not gpus:
        return _html(pages.not_found(title, "No results are loaded yet.", []), 404)
    links = [(label, pages.bandwidth_url(label)) for label in gpus]
    return _html(pages.not_found(title, f"No results of GPU {gpu!r}. GPUs with results:", links), 404)


def _choose_gpu(index: StoreIndex, title: str, url_of) -> HTMLResponse:
    """The page asked for no GPU and more than one could be meant: the reader picks."""
    gpus = index.available_gpus()
    if not gpus:
        return _html(pages.not_found(title, "No results are loaded yet.", []), 404)
    items = "".join(f"<li>{link(label, url_of(label))}</li>" for label in gpus)
    return _html(pages.page(title, f"<p>Pick a GPU:</p><ul>{items}</ul>"))


def _gpu_picker(index: StoreIndex, gpu: str | None, url_of, everything: str | None = None) -> str:
    options = [(everything, url_of(None), gpu is None)] if everything else []
    options += [(label, url_of(label), label == gpu) for label in index.available_gpus()]
    return pages.picker("GPU", options)


def _shape_pickers(index: StoreIndex, gpu: str, shape: Shape, dtype: DType) -> str:
    shapes = data.tuned_shapes(index, gpu)
    shape_options = [(str(s), pages.shape_url(gpu, s, dtype.name), s == shape) for s in shapes]
    if shape not in shapes:
        shape_options.insert(0, (f"{shape} (not tuned)", pages.shape_url(gpu, shape, dtype.name), True))
    dtype_options = []
    for name in variants.DTYPES:
        tuned = (gpu, shape_tuple(shape), name) in index.groups
        text = name if tuned else f"{name} (not tuned)"
        dtype_options.append((text, pages.shape_url(gpu, shape, name), name == dtype.name))
    return pages.pickers(
        _gpu_picker(index, gpu, lambda g: pages.shape_url(g, shape, dtype.name)),
        pages.picker("Shape", shape_options),
        pages.picker("dtype", dtype_options),
    )


@router.get("/", include_in_schema=False)
async def root() -> RedirectResponse:
    return RedirectResponse("/dashboards")


@router.get("/static/plotly.min.js", include_in_schema=False)
async def plotly_js() -> FileResponse:
    return FileResponse(
        PLOTLY_JS, media_type="text/javascript", headers={"Cache-Control": "public, max-age=86400"}
    )


@router.get("/dashboards", responses=HTML_RESPONSES, summary="Overview")
def overview(index: IndexDep, gpu: GpuQuery = None, dtype: DTypeFilter = None) -> HTMLResponse:
    """Every GPU x shape x dtype (or one GPU's, one dtype's) with its winner, time, fraction of
    the copy and speed-up; each family against the best per shape; links to every recipe."""
    title = "Tuned configurations" + (f" on {gpu}" if gpu else "") + (f", {dtype}" if dtype else "")
    if gpu is not None and gpu not in index.by_gpu:
        return _no_gpu(index, title, gpu)
    table = data.overview(index.frame)
    families = data.family_vs_best(index.frame, gpu)
    if gpu is not None:
        table = table[table["gpu"] == gpu]
    if dtype is not None:
        table, families = table[table["dtype"] == dtype], families[families["dtype"] == dtype]
    dtypes = [(name, pages.overview_url(gpu, name), name == dtype) for name in variants.DTYPES]
    body = pages.pickers(
        _gpu_picker(index, gpu, lambda g: pages.overview_url(g, dtype), everything="all GPUs"),
        pages.picker("dtype", [("all dtypes", pages.overview_url(gpu, None), dtype is None), *dtypes]),
    )
    compare = len(index.by_gpu) > 1
    # the note goes under the charts, so that the board of winners stays above the fold
    after = (
        '<p class="note">Times are medians of the winning trial; "time / copy" divides by a '
        "device-to-device copy of the same bytes timed in the same process. "
        f"{COPY_NOTE} Every winner links to its launch recipe (GET /best) and its kernel source in "
        "the table below.</p><h2>Winners</h2>"
        + pages.overview_table(table.reset_index(drop=True), compare=compare)
    )
    fed = data.overview(index.frame, L2_FED)
    if gpu is not None:
        fed = fed[fed["gpu"] == gpu]
    if dtype is not None:
        fed = fed[fed["dtype"] == dtype]
    if not fed.empty:
        after += (
            '<h2 id="fed">Tuned with dout in L2</h2><p class="note">Configurations tuned with '
            "<code>python -m tuner --l2 fed</code>: each call timed after a kernel that writes "
            "dout, as the kernel before it leaves L2 in a training step. They rank apart from the "
            "winners above; GET /best?l2=fed and the PyTorch op serve them. The figures and the "
            "other pages are of the cold rows.</p>"
            + pages.overview_table(fed.reset_index(drop=True), False, L2_FED)
        )
    figures = [draw.overview_board(table), draw.overview_speedup(table), draw.family_vs_best(families)]
    return _html(pages.page(title, body, figures, after))


def _winner_summary(trials: pd.DataFrame, gpu: str, shape: Shape, dtype: DType) -> str:
    best = data.overview(trials)
    ok = int((trials["status"] == Status.OK).sum())
    searches = ", ".join(
        f"{e(name)} ({n})" for name, n in trials.groupby("series", sort=False).size().items()
    )
    counts = f"<p>{len(trials)} trials, {ok} correct; searches: {searches}. "
    compared = len(timed_as_served(trials))
    if compared < len(trials):
        counts += (
            f"The winner and the heat map are ranked among the {compared} of these trials timed "
            f"with the tuner's {DEFAULT_HOLD_US:g} µs hold; the other {len(trials) - compared}, timed "
            "otherwise, are in the trials chart and ranked after them: times taken the two ways are "
            "not compared. "
        )
    counts += f"{link('This shape on every GPU', pages.gpus_url(shape, dtype.name))}.</p>"
    if best.empty:
        return f'<div class="summary"><p>No correct configuration.</p>{counts}</div>'
    row = best.iloc[0]

    def num(value: object, fmt: str) -> str:
        return format(float(value), fmt) if pd.notna(value) else "-"

    return (
        '<div class="summary winner">'
        f"<p><b>Winner:</b> <code>{e(row['config_key'])}</code>: {num(row['time_ms'], '.4f')} ms, "
        f"{num(row['gbps'], '.0f')} GB/s, {num(row['ratio_to_copy'], '.3f')}x the copy, "
        f"{num(row['speedup_vs_baseline'], '.2f')}x llm.c's kernel1 "
        f"({pages.winner_links(gpu, shape, dtype.name, row['source_hash'])})</p>{counts}</div>"
    )


@router.get("/dashboards/shape", responses=HTML_RESPONSES, summary="One shape")
def shape_page(index: IndexDep, shape: ShapeDep, dtype: DTypeDep, gpu: GpuQuery = None) -> HTMLResponse:
    """One GPU, shape and dtype: variant x block-size heat map with the winner marked, every
    trial, search convergence. Without `gpu`, the only GPU with results (or the only one that
    tuned this shape). On a shape that GPU did not tune: the configuration GET /best serves."""
    if gpu is None:
        gpu = data.default_gpu(index, shape, dtype)
        if gpu is None:
            return _choose_gpu(
                index, f"{shape} {dtype.name}", lambda g: pages.shape_url(g, shape, dtype.name)
            )
    title = f"{gpu} {shape} {dtype.name}"
    if gpu not in index.by_gpu:
        return _html(pages.not_found(title, "No results of this GPU. Tuned ones:", _tuned_links(index)), 404)
    trials = data.shape_trials(index.frame, gpu, shape, dtype.name)
    picks = _shape_pickers(index, gpu, shape, dtype)
    if trials.empty:
        served = data.served_instead(index, gpu, shape, dtype)
        if served is None:
            message = (
                "No trials of this GPU, shape and dtype, and no tuned configuration can serve it. Tuned ones:"
            )
            return _html(pages.not_found(title, message, _tuned_links(index, gpu)), 404)
        nearest = data.nearest_tuned(index, gpu, shape, dtype)
        body = picks + pages.served_summary(served, shape, dtype.name)
        return _html(pages.page(f"{title}: not tuned", body, after=pages.nearest_table(nearest, gpu)))
    refs = data.reference_times(trials)
    table = data.heatmap(trials)
    figures = [
        draw.heatmap(table, data.heatmap_winner(table)),
        draw.convergence(data.convergence(trials), refs["baseline_ms"], refs["copy_ms"]),
        draw.trials_scatter(data.scatter(trials), refs["baseline_ms"], refs["copy_ms"]),
    ]
    body = picks + _winner_summary(trials, gpu, shape, dtype)
    return _html(pages.page(title, body, figures))


@router.get("/dashboards/gpus", responses=HTML_RESPONSES, summary="GPUs compared")
def gpus_page(index: IndexDep, shape: ShapeDep, dtype: DTypeDep) -> HTMLResponse:
    """The same shape and dtype on every GPU, side by side."""
    title = f"{shape} {dtype.name} on every GPU"
    winners = data.gpu_comparison(index.frame, shape, dtype.name)
    if winners.empty:
        return _html(
            pages.not_found(
                title, "No GPU has results for this shape and dtype. Tuned ones:", _tuned_links(index)
            ),
            404,
        )
    shapes = data.tuned_shapes(index)
    body = pages.pickers(
        pages.picker("Shape", [(str(s), pages.gpus_url(s, dtype.name), s == shape) for s in shapes]),
        pages.picker("dtype", [(d, pages.gpus_url(shape, d), d == dtype.name) for d in variants.DTYPES]),
    ) + pages.overview_table(winners, compare=False)
    figures = [draw.gpu_winners(winners), draw.gpu_families(data.family_best(index.frame, shape, dtype.name))]
    return _html(pages.page(title, body, figures))


@router.get("/dashboards/bandwidth", responses=HTML_RESPONSES, summary="Bandwidth")
def bandwidth_page(index: IndexDep, gpu: GpuQuery = None) -> HTMLResponse:
    """Achieved GB/s of every tuned shape of one GPU against bytes moved, beside the device
    copy of the same bytes and the GPU's peak bandwidth (where it is known)."""
    if gpu is None:
        gpu = data.default_gpu(index)
        if gpu is None:
            return _choose_gpu(index, "Bandwidth", pages.bandwidth_url)
    title = f"Bandwidth on {gpu}"
    if gpu not in index.by_gpu:
        return _no_gpu(index, title, gpu)
    table = data.bandwidth(index.frame, gpu)
    names = data.gpu_names(index.frame, gpu)
    peak = data.peak_bandwidth(names)
    if peak is not None:
        note = f"{e(peak[0])}: peak DRAM bandwidth {peak[1]:.0f} GB/s (NVIDIA's data sheet)."
    else:
        reported = ", ".join(names) or "no device name recorded"
        note = f"No peak bandwidth is known for this GPU ({e(reported)}): no peak line."
    body = pages.pickers(_gpu_picker(index, gpu, pages.bandwidth_url)) + (
        f'<p class="note">GB/s = bytes moved / time (every dout element read once, every dinp element '
        f"written once). The device copy moves the same bytes in the same process. {COPY_NOTE} "
        f"{note}</p>"
    )
    figures = [draw.bandwidth(table, peak), draw.bandwidth_ratio(table)]
    after = pages.bandwidth_table(table, peak[1] if peak else None)
    return _html(pages.page(title, body, figures, after))
