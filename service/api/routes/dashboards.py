"""Dashboard pages (HTML with plotly charts) and the plotly.js they load, served locally.

Every page shows one op (`op`, default repkv_backward, kept by every link and picker): its
charts and tables are drawn from that op's rows alone."""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Annotated

import pandas as pd
from fastapi import APIRouter, Query
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse

import variants
from results.best import timed_as_served
from results.schema import DEFAULT_HOLD_US, L2_FED, Status
from service.api.deps import DTypeDep, DTypeFilter, GpuQuery, IndexDep, OpQuery, ShapeDep, check_op_serves
from service.dashboards import data, draw, pages
from service.dashboards import navigation as nav
from service.dashboards.pages import e, link
from service.dashboards.routing import HTML_RESPONSES, HtmlErrorRoute, error_page  # noqa: F401
from variants import DType, Shape

router = APIRouter(tags=["dashboards"], route_class=HtmlErrorRoute)

# How the copy is timed (results.schema.COPY_FASTEST), and how it was before.
COPY_NOTE = (
    "The copy is the faster of cudaMemcpyAsync and a 16-byte copy kernel; rows timed before "
    "that (no copy_method) held to cudaMemcpyAsync alone, which on an H200 took up to 1.35x "
    "the kernel's time at odd byte counts, so their ratio reads low there."
)
PLOTLY_JS = Path(str(resources.files("plotly") / "package_data" / "plotly.min.js"))
DEFAULT_OP = variants.DEFAULT_OP


@router.get("/", include_in_schema=False)
async def root() -> RedirectResponse:
    return RedirectResponse("/dashboards")


@router.get("/static/plotly.min.js", include_in_schema=False)
async def plotly_js() -> FileResponse:
    return FileResponse(
        PLOTLY_JS, media_type="text/javascript", headers={"Cache-Control": "public, max-age=86400"}
    )


@router.get("/dashboards", responses=HTML_RESPONSES, summary="Overview")
def overview(
    index: IndexDep,
    gpu: GpuQuery = None,
    dtype: DTypeFilter = None,
    op: OpQuery = DEFAULT_OP,
    page: Annotated[
        int,
        Query(ge=1, le=10_000, description=f"which {draw.BOARD_SHAPES} shapes, smallest first (1: first)"),
    ] = 1,
) -> HTMLResponse:
    """Every GPU x shape x dtype of op `op` (or one GPU's, one dtype's) with its winner, time,
    fraction of the copy and speed-up; each family against the best per shape; links to every
    recipe. A page holds BOARD_SHAPES shapes, so that its board of winners fits one screen."""
    title = "Tuned configurations" + (f" on {gpu}" if gpu else "") + (f", {dtype}" if dtype else "")
    title = nav.titled(title, op)
    untuned = nav.untuned(index, op, title, lambda o: pages.overview_url(gpu, dtype, o))
    if untuned is not None:
        return untuned
    tuned = index.for_op(op)
    if gpu is not None and gpu not in tuned.by_gpu:
        return nav.no_gpu(tuned, title, gpu, op)
    table = data.overview(index.frame, op=op)
    families = data.family_vs_best(index.frame, gpu, op)
    if gpu is not None:
        table = table[table["gpu"] == gpu]
    if dtype is not None:
        table, families = table[table["dtype"] == dtype], families[families["dtype"] == dtype]
    table, page_count, shape_count = data.shape_page(table, page, draw.BOARD_SHAPES)
    families = families[families["short_shape"].isin(set(table["short_shape"]))]  # the page's shapes
    if page > page_count:
        first = [("the first page", pages.overview_url(gpu, dtype, op))]
        pages_of = f"{page_count} page{'' if page_count == 1 else 's'}"
        return nav.not_found(
            title, f"There {'is' if page_count == 1 else 'are'} {pages_of} of shapes, not {page}.", first, op
        )
    dtypes = [(name, pages.overview_url(gpu, name, op), name == dtype) for name in variants.DTYPES]
    body = pages.pickers(
        nav.op_picker(index, op, lambda o: pages.overview_url(gpu, dtype, o)),
        nav.gpu_picker(tuned, gpu, lambda g: pages.overview_url(g, dtype, op), everything="all GPUs"),
        pages.picker("dtype", [("all dtypes", pages.overview_url(gpu, None, op), dtype is None), *dtypes]),
    )
    if page_count > 1:
        body += _page_links(page, page_count, shape_count, lambda n: pages.overview_url(gpu, dtype, op, n))
    compare = len(tuned.by_gpu) > 1
    # the note goes under the charts, so that the board of winners stays above the fold
    after = (
        '<p class="note">Times are medians of the winning trial; "time / copy" divides by a '
        "device-to-device copy of the same bytes timed in the same process. "
        f"{COPY_NOTE} Every winner links to its launch recipe (GET /best) and its kernel source in "
        "the table below.</p><h2>Winners</h2>"
        + pages.overview_table(table.reset_index(drop=True), compare=compare)
    )
    fed = data.overview(index.frame, L2_FED, op=op)
    if gpu is not None:
        fed = fed[fed["gpu"] == gpu]
    if dtype is not None:
        fed = fed[fed["dtype"] == dtype]
    if not fed.empty:
        read = e(variants.get_op(op).inputs[0].name)
        after += (
            f'<h2 id="fed">Tuned with {read} in L2</h2><p class="note">Configurations tuned with '
            "<code>python -m tuner --l2 fed</code>: each call timed after a kernel that writes "
            f"{read}, as the kernel before it leaves L2 in a training step. They rank apart from the "
            "winners above; GET /best?l2=fed and the PyTorch op serve them. The figures and the "
            "other pages are of the cold rows.</p>"
            + pages.overview_table(fed.reset_index(drop=True), False, L2_FED)
        )
    figures = [draw.overview_board(table), draw.overview_speedup(table), draw.family_vs_best(families)]
    return nav.html(pages.page(title, body, figures, after, op=op))


def _page_links(page: int, page_count: int, shape_count: int, url_of: Callable[[int], str]) -> str:
    """'Shapes 1-48 of 61' and a link to every other page."""
    first = (page - 1) * draw.BOARD_SHAPES + 1
    last = min(page * draw.BOARD_SHAPES, shape_count)
    others = " ".join(e(str(n)) if n == page else link(str(n), url_of(n)) for n in range(1, page_count + 1))
    return f'<p class="pages">Shapes {first}-{last} of {shape_count}, smallest first. Page: {others}</p>'


def _winner_summary(trials: pd.DataFrame, gpu: str, shape: Shape, dtype: DType, op: str) -> str:
    best = data.overview(trials, op=op)
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
    counts += f"{link('This shape on every GPU', pages.gpus_url(shape, dtype.name, op))}.</p>"
    if best.empty:
        return f'<div class="summary"><p>No correct configuration.</p>{counts}</div>'
    row = best.iloc[0]

    def num(value: object, fmt: str) -> str:
        return format(float(value), fmt) if pd.notna(value) else "-"

    links = pages.winner_links(gpu, shape, dtype.name, row["source_hash"], op=op)
    return (
        '<div class="summary winner">'
        f"<p><b>Winner:</b> <code>{e(row['config_key'])}</code>: {num(row['time_ms'], '.4f')} ms, "
        f"{num(row['gbps'], '.0f')} GB/s, {num(row['ratio_to_copy'], '.3f')}x the copy, "
        f"{num(row['speedup_vs_baseline'], '.2f')}x llm.c's kernel1 ({links})</p>{counts}</div>"
    )


@router.get("/dashboards/shape", responses=HTML_RESPONSES, summary="One shape")
def shape_page(
    index: IndexDep, shape: ShapeDep, dtype: DTypeDep, gpu: GpuQuery = None, op: OpQuery = DEFAULT_OP
) -> HTMLResponse:
    """One GPU, shape and dtype of op `op`: variant x block-size heat map with the winner
    marked, every trial, search convergence. Without `gpu`, the only GPU with results (or the
    only one that tuned this shape). On a shape that GPU did not tune: the configuration GET
    /best serves."""
    check_op_serves(op, shape)
    named = nav.titled(f"{shape} {dtype.name}", op)
    untuned = nav.untuned(index, op, named, lambda o: pages.shape_url(gpu, shape, dtype.name, o))
    if untuned is not None:
        return untuned
    tuned = index.for_op(op)
    if gpu is None:
        gpu = data.default_gpu(tuned, shape, dtype)
        if gpu is None:
            return nav.choose_gpu(tuned, named, lambda g: pages.shape_url(g, shape, dtype.name, op), op)
    title = nav.titled(f"{gpu} {shape} {dtype.name}", op)
    if gpu not in tuned.by_gpu:
        return nav.not_found(title, "No results of this GPU. Tuned ones:", nav.tuned_links(tuned, op), op)
    trials = data.shape_trials(index.frame, gpu, shape, dtype.name, op)
    picks = nav.shape_pickers(index, tuned, gpu, shape, dtype)
    if trials.empty:
        served = data.served_instead(tuned, gpu, shape, dtype)
        if served is None:
            message = (
                "No trials of this GPU, shape and dtype, and no tuned configuration can serve it. Tuned ones:"
            )
            return nav.not_found(title, message, nav.tuned_links(tuned, op, gpu), op)
        nearest = data.nearest_tuned(tuned, gpu, shape, dtype)
        body = picks + pages.served_summary(served, shape, dtype.name)
        after = pages.nearest_table(nearest, gpu, op)
        return nav.html(pages.page(f"{title}: not tuned", body, after=after, op=op))
    refs = data.reference_times(trials)
    table = data.heatmap(trials)
    figures = [
        draw.heatmap(table, data.heatmap_winner(trials)),
        draw.convergence(data.convergence(trials), refs["baseline_ms"], refs["copy_ms"]),
        draw.trials_scatter(data.scatter(trials), refs["baseline_ms"], refs["copy_ms"]),
    ]
    body = picks + _winner_summary(trials, gpu, shape, dtype, op)
    return nav.html(pages.page(title, body, figures, op=op))


@router.get("/dashboards/gpus", responses=HTML_RESPONSES, summary="GPUs compared")
def gpus_page(index: IndexDep, shape: ShapeDep, dtype: DTypeDep, op: OpQuery = DEFAULT_OP) -> HTMLResponse:
    """The same shape and dtype of op `op` on every GPU, side by side."""
    check_op_serves(op, shape)
    title = nav.titled(f"{shape} {dtype.name} on every GPU", op)
    untuned = nav.untuned(index, op, title, lambda o: pages.gpus_url(shape, dtype.name, o))
    if untuned is not None:
        return untuned
    tuned = index.for_op(op)
    winners = data.gpu_comparison(index.frame, shape, dtype.name, op)
    shapes = data.tuned_shapes(tuned)
    shape_options = [(str(s), pages.gpus_url(s, dtype.name, op), s == shape) for s in shapes]
    if shape not in shapes:  # as the shape page: the picker shows this shape, not the first tuned one
        shape_options.insert(0, (f"{shape} (not tuned)", pages.gpus_url(shape, dtype.name, op), True))
    pickers = pages.pickers(
        nav.op_picker(index, op, lambda o: pages.gpus_url(shape, dtype.name, o)),
        pages.picker("Shape", shape_options),
        pages.picker("dtype", [(d, pages.gpus_url(shape, d, op), d == dtype.name) for d in variants.DTYPES]),
    )
    if winners.empty:  # tuned nowhere: what GET /best serves each GPU instead, as the shape page does
        served = [data.served_instead(tuned, gpu, shape, dtype) for gpu in tuned.available_gpus()]
        served = [answer for answer in served if answer is not None]
        if not served:
            message = "No GPU tuned this shape and dtype, and nothing tuned can serve it. Tuned ones:"
            return nav.not_found(title, message, nav.tuned_links(tuned, op), op)
        body = pickers + pages.served_by_gpu_table(served, shape, dtype.name)
        return nav.html(pages.page(f"{title}: not tuned", body, op=op))
    body = pickers + pages.overview_table(winners, compare=False)
    families = data.family_best(index.frame, shape, dtype.name, op)
    figures = [draw.gpu_winners(winners), draw.gpu_families(families)]
    return nav.html(pages.page(title, body, figures, op=op))


@router.get("/dashboards/bandwidth", responses=HTML_RESPONSES, summary="Bandwidth")
def bandwidth_page(index: IndexDep, gpu: GpuQuery = None, op: OpQuery = DEFAULT_OP) -> HTMLResponse:
    """Achieved GB/s of every tuned shape of op `op` on one GPU against bytes moved, beside the
    device copy of the same bytes and the GPU's peak bandwidth (where it is known)."""
    named = nav.titled("Bandwidth", op)
    untuned = nav.untuned(index, op, named, lambda o: pages.bandwidth_url(gpu, o))
    if untuned is not None:
        return untuned
    tuned = index.for_op(op)
    if gpu is None:
        gpu = data.default_gpu(tuned)
        if gpu is None:
            return nav.choose_gpu(tuned, named, lambda g: pages.bandwidth_url(g, op), op)
    title = nav.titled(f"Bandwidth on {gpu}", op)
    if gpu not in tuned.by_gpu:
        return nav.no_gpu(tuned, title, gpu, op)
    table = data.bandwidth(index.frame, gpu, op)
    names = data.gpu_names(index.frame, gpu)
    peak = data.peak_bandwidth(names)
    if peak is not None:
        note = f"{e(peak[0])}: peak DRAM bandwidth {peak[1]:.0f} GB/s (NVIDIA's data sheet)."
    else:
        reported = ", ".join(names) or "no device name recorded"
        note = f"No peak bandwidth is known for this GPU ({e(reported)}): no peak line."
    moved = data.moved_bytes_text(op)
    body = pages.pickers(
        nav.op_picker(index, op, lambda o: pages.bandwidth_url(gpu, o)),
        nav.gpu_picker(tuned, gpu, lambda g: pages.bandwidth_url(g, op)),
    ) + (
        f'<p class="note">GB/s = bytes moved / time ({e(moved)}). '
        f"The device copy moves the same bytes in the same process. {COPY_NOTE} {note}</p>"
    )
    baseline = variants.get_op(op).baseline_name
    baseline = "llm.c kernel1, block 128" if baseline == "llm.c" else f"{baseline} (block 128)"
    figures = [draw.bandwidth(table, peak, moved, baseline), draw.bandwidth_ratio(table)]
    after = pages.bandwidth_table(table, peak[1] if peak else None)
    return nav.html(pages.page(title, body, figures, after, op=op))
