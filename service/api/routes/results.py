"""GET /results: trial rows, filtered, as JSON, CSV or parquet, streamed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Annotated, Literal

import numpy as np
import pandas as pd
from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import BeforeValidator

import variants
from results.index import StoreIndex
from results.schema import STATUSES, ops_of
from results.store import to_table
from service.api import export
from service.api.deps import DTypeFilter, GpuQuery, IndexDep, OpFilter, fold_case
from service.api.errors import ERROR_RESPONSES, NotFound, unprocessable
from service.api.middleware import is_head
from service.api.models import ResultsPage
from variants.shape import MAX_DIM

router = APIRouter(tags=["results"])

PARQUET_MEDIA_TYPE = "application/vnd.apache.parquet"
MEDIA_TYPES = {"json": "application/json", "csv": "text/csv", "parquet": PARQUET_MEDIA_TYPE}
MAX_LIMIT = 1_000_000

Dim = Annotated[int | None, Query(ge=1, le=MAX_DIM)]
# Unknown names are refused (422, naming the accepted ones), not answered with no rows.
StatusName = Literal[tuple(map(str, STATUSES))]  # type: ignore[valid-type]
# Every op's family names, each once (names repeat across ops: `op` tells them apart).
FAMILY_NAMES = tuple(dict.fromkeys(name for op in variants.OPS.values() for name in op.families))
FamilyName = Literal[FAMILY_NAMES]  # type: ignore[valid-type]


def filter_rows(frame: pd.DataFrame, filters: dict[str, object]) -> np.ndarray:
    """Positions of the rows whose columns equal every given (non-None) filter value (`op`:
    each row's op, repkv_backward where a frame built without the column names none)."""
    mask = np.ones(len(frame), dtype=bool)
    for column, value in filters.items():
        if value is not None:
            values = ops_of(frame) if column == "op" else frame[column]
            mask &= (values == value).to_numpy(dtype=bool, na_value=False)
    return np.flatnonzero(mask)


def page_url(request: Request, **params: object) -> str:
    """This request's URL with `params` set, relative to the server (path and query): the
    client's Host header never comes back in a link."""
    url = request.url.include_query_params(**params)
    return f"{url.path}?{url.query}"


def rows_table(index: StoreIndex):
    """The index's rows as arrow (kept by the live store; made here for an index built from
    a frame alone)."""
    return index.table if index.table is not None else to_table(index.frame)


@router.get(
    "/results",
    response_model=ResultsPage,
    responses={
        **ERROR_RESPONSES,
        200: {
            "description": "trial rows: JSON (default), CSV or parquet (the trial schema). Every "
            "format carries `X-Total-Count` (rows matching the filters) and, when rows remain "
            'after this page, `Link: <url>; rel="next"`.',
            "content": {
                "text/csv": {"schema": {"type": "string"}},
                PARQUET_MEDIA_TYPE: {"schema": {"type": "string", "format": "binary"}},
            },
            "headers": {
                "X-Total-Count": {"description": "rows matching the filters", "schema": {"type": "integer"}},
                "Link": {
                    "description": 'the next page, as <path?query>; rel="next" (relative to this server)',
                    "schema": {"type": "string"},
                },
            },
        },
    },
    summary="Trial rows",
)
def results(
    request: Request,
    index: IndexDep,
    gpu: GpuQuery = None,
    op: OpFilter = None,
    B: Dim = None,
    T: Dim = None,
    NH: Dim = None,
    NH_KV: Dim = None,
    HD: Dim = None,
    dtype: DTypeFilter = None,
    family: Annotated[
        FamilyName | None, Query(description="kernel family (of any op; with `op`, of that op)")
    ] = None,
    status: Annotated[StatusName | None, Query(description="trial status")] = None,
    format: Annotated[
        Literal["json", "csv", "parquet"],
        BeforeValidator(fold_case),
        Query(description="response format (any case)"),
    ] = "json",
    limit: Annotated[
        int | None, Query(ge=1, le=MAX_LIMIT, description="rows at most (default: every matching row)")
    ] = None,
    offset: Annotated[int, Query(ge=0, description="matching rows to skip first")] = 0,
) -> StreamingResponse:
    """Every trial row (failed ones too) matching the filters, in the store's order, streamed:
    all of them unless `limit` asks for a page (then `offset` pages on; the `Link` header and
    the JSON's `next` give the next page's URL). JSON shows non-finite times as null; CSV and
    parquet keep them. Integer columns stay integers in every format (null where unset). Every
    row names its op (`op`, in every format); `op` keeps one op's rows (default: every op's).
    A GPU with no rows at all is a 404 naming the GPUs that have some."""
    if op is not None and family is not None and family not in variants.get_op(op).families:
        names = ", ".join(variants.get_op(op).families)
        raise unprocessable("family", f"{family} is not a family of {op}; its families: {names}", family)
    if gpu is not None and gpu not in index.gpus:  # a typo is not "no rows": /shapes answers it so too
        raise NotFound(f"no results for GPU {gpu!r}", sorted(index.gpus))
    filters = {
        "gpu": gpu,
        "op": op,
        "B": B,
        "T": T,
        "NH": NH,
        "NH_KV": NH_KV,
        "HD": HD,
        "dtype": dtype,
        "family": family,
        "status": status,
    }
    matching = filter_rows(index.frame, filters)
    total = len(matching)
    page = matching[offset : None if limit is None else offset + limit]
    end = offset + len(page)
    next_url = page_url(request, offset=end) if end < total else None
    headers = {"X-Total-Count": str(total)}
    if next_url is not None:
        headers["Link"] = f'<{next_url}>; rel="next"'
    if format != "json":
        extension = "csv" if format == "csv" else "parquet"
        headers["Content-Disposition"] = f'attachment; filename="repkv-results.{extension}"'
    media_type = MEDIA_TYPES[format]
    if is_head(request):  # the headers alone: encode nothing
        return StreamingResponse(iter(()), media_type=media_type, headers=headers)
    table = rows_table(index)
    chunks: Iterator[bytes]
    if format == "csv":
        chunks = export.csv_chunks(table, page)
    elif format == "parquet":
        chunks = export.parquet_chunks(table, page)
    else:
        fields = {"total": total, "returned": len(page), "offset": offset, "next": next_url}
        head = json.dumps(fields, separators=(",", ":"))[:-1] + ',"rows":['
        chunks = export.json_chunks(table, page, head.encode())
    return StreamingResponse(export.stream(chunks), media_type=media_type, headers=headers)
