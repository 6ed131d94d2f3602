"""What the dashboard pages share around the store index: the ops with rows, the op, GPU, shape
and dtype pickers, the pages that pick a GPU, name none found, or say an op is not tuned yet.
Each takes the index of the op shown (`StoreIndex.for_op`) and that op, which every link keeps."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.responses import HTMLResponse

import variants
from results.index import StoreIndex, shape_tuple
from service.dashboards import data, pages
from service.dashboards.urls import link
from service.nothing_served import ops_with_rows, unread_files
from variants import DType, Shape


def html(text: str, status_code: int = 200) -> HTMLResponse:
    return HTMLResponse(text, status_code=status_code)


def titled(title: str, op: str) -> str:
    """A page's title, naming the op where it is not the default one."""
    return title if op == variants.DEFAULT_OP else f"{title} ({op})"


def op_picker(index: StoreIndex, op: str, url_of: Callable[[str], str]) -> str:
    return pages.op_picker(op, url_of, ops_with_rows(index))


def untuned(index: StoreIndex, op: str, title: str, url_of: Callable[[str], str]) -> HTMLResponse | None:
    """The page of an op without rows (the default op on an empty store too): the op picker,
    one line with the command that tunes it, and how many results files could not be read
    (200: nothing is wrong with the request). None when the op has rows."""
    if op in ops_with_rows(index):
        return None
    body = pages.pickers(op_picker(index, op, url_of)) + pages.untuned_op(op, unread_files(index))
    return html(pages.page(title, body, op=op))


def tuned_links(index: StoreIndex, op: str, gpu: str | None = None) -> list[tuple[str, str]]:
    links = []
    for group in index.groups.values():
        if gpu is None or group.gpu == gpu:
            links.append(
                (
                    f"{group.gpu} {group.shape} {group.dtype.name}",
                    pages.shape_url(group.gpu, group.shape, group.dtype.name, op),
                )
            )
    return links[:200]


def not_found(title: str, message: str, links: list[tuple[str, str]], op: str) -> HTMLResponse:
    return html(pages.not_found(title, message, links, op), 404)


def no_gpu(index: StoreIndex, title: str, gpu: str, op: str) -> HTMLResponse:
    gpus = index.available_gpus()
    if not gpus:
        return not_found(title, "No results are loaded yet.", [], op)
    links = [(label, pages.bandwidth_url(label, op)) for label in gpus]
    return not_found(title, f"No results of GPU {gpu!r}. GPUs with results:", links, op)


def choose_gpu(index: StoreIndex, title: str, url_of: Callable[[str], str], op: str) -> HTMLResponse:
    """The page asked for no GPU and more than one could be meant: the reader picks."""
    gpus = index.available_gpus()
    if not gpus:
        return not_found(title, "No results are loaded yet.", [], op)
    items = "".join(f"<li>{link(label, url_of(label))}</li>" for label in gpus)
    return html(pages.page(title, f"<p>Pick a GPU:</p><ul>{items}</ul>", op=op))


def gpu_picker(index: StoreIndex, gpu: str | None, url_of, everything: str | None = None) -> str:
    options = [(everything, url_of(None), gpu is None)] if everything else []
    options += [(label, url_of(label), label == gpu) for label in index.available_gpus()]
    return pages.picker("GPU", options)


def shape_pickers(root: StoreIndex, index: StoreIndex, gpu: str, shape: Shape, dtype: DType) -> str:
    """The op, GPU, shape and dtype pickers of the shape page (`root`: the index of every op)."""
    op = index.op
    shapes = data.tuned_shapes(index, gpu)
    shape_options = [(str(s), pages.shape_url(gpu, s, dtype.name, op), s == shape) for s in shapes]
    if shape not in shapes:
        shape_options.insert(0, (f"{shape} (not tuned)", pages.shape_url(gpu, shape, dtype.name, op), True))
    dtype_options = []
    for name in variants.DTYPES:
        tuned = (gpu, shape_tuple(shape), name) in index.groups
        text = name if tuned else f"{name} (not tuned)"
        dtype_options.append((text, pages.shape_url(gpu, shape, name, op), name == dtype.name))
    return pages.pickers(
        op_picker(root, op, lambda o: pages.shape_url(gpu, shape, dtype.name, o)),
        gpu_picker(index, gpu, lambda g: pages.shape_url(g, shape, dtype.name, op)),
        pages.picker("Shape", shape_options),
        pages.picker("dtype", dtype_options),
    )
