"""The links of the dashboards: every page's URL, the recipe (GET /best) and kernel source of a
winner. The op rides in every URL as `op=...`, left out for the default op (repkv_backward),
so that the links of before still name the same pages."""

from __future__ import annotations

import html
from urllib.parse import urlencode

import variants
from results.schema import L2_COLD
from variants import Shape


def e(value: object) -> str:
    return html.escape(str(value))


def link(text: str, href: str) -> str:
    return f'<a href="{e(href)}">{e(text)}</a>'


def op_query(op: str | None) -> dict[str, str]:
    """`{"op": op}`, or nothing for the default op (or None)."""
    return {} if op is None or op == variants.DEFAULT_OP else {"op": op}


def _url(path: str, query: dict[str, object]) -> str:
    return path + ("?" + urlencode(query) if query else "")


def shape_query(shape: Shape, dtype: str) -> dict[str, object]:
    return {**shape.as_dict(), "dtype": dtype}


def best_url(gpu: str, shape: Shape, dtype: str, l2: str = L2_COLD, op: str | None = None) -> str:
    """The recipe GET /best answers with for this GPU, shape and dtype (in L2 state `l2`) of `op`."""
    state = {} if l2 == L2_COLD else {"l2": l2}
    return _url("/best", {"gpu": gpu, **shape_query(shape, dtype), **state, **op_query(op)})


def kernel_url(source_hash: str) -> str:
    return f"/kernels/{source_hash}"


def shape_url(gpu: str | None, shape: Shape, dtype: str, op: str | None = None) -> str:
    query = ({"gpu": gpu} if gpu else {}) | shape_query(shape, dtype) | op_query(op)
    return _url("/dashboards/shape", query)


def gpus_url(shape: Shape, dtype: str, op: str | None = None) -> str:
    return _url("/dashboards/gpus", shape_query(shape, dtype) | op_query(op))


def bandwidth_url(gpu: str | None = None, op: str | None = None) -> str:
    return _url("/dashboards/bandwidth", ({"gpu": gpu} if gpu else {}) | op_query(op))


def overview_url(
    gpu: str | None = None, dtype: str | None = None, op: str | None = None, page: int = 1
) -> str:
    query = {k: v for k, v in (("gpu", gpu), ("dtype", dtype)) if v}
    return _url("/dashboards", query | op_query(op) | ({"page": str(page)} if page > 1 else {}))


def rule_quality_url(gpu: str, op: str | None = None) -> str:
    return _url("/rule-quality", {"gpu": gpu, **op_query(op)})


def winner_links(
    gpu: str, shape: Shape, dtype: str, source_hash: object, l2: str = L2_COLD, op: str | None = None
) -> str:
    """'recipe' (GET /best) and 'source' (GET /kernels/{hash}) links of one winner."""
    links = [f'<a class="recipe" href="{e(best_url(gpu, shape, dtype, l2, op))}">recipe</a>']
    if isinstance(source_hash, str) and source_hash:
        links.append(f'<a class="source" href="{e(kernel_url(source_hash))}">source</a>')
    return " · ".join(links)
