"""GET /results: trial rows, filtered, as JSON, CSV or parquet."""

from __future__ import annotations

import io
import math
from typing import Annotated, Literal

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
from fastapi import APIRouter, Query
from fastapi.responses import Response

from results.store import to_table
from service.api.deps import GpuQuery, IndexDep
from service.api.errors import ERROR_RESPONSES
from service.api.models import ResultsPage
from variants.shape import MAX_DIM

router = APIRouter(tags=["results"])

PARQUET_MEDIA_TYPE = "application/vnd.apache.parquet"
DEFAULT_LIMIT, MAX_LIMIT = 1000, 1_000_000

Dim = Annotated[int | None, Query(ge=1, le=MAX_DIM)]
Text = Annotated[str | None, Query(min_length=1, max_length=64)]


def filter_rows(frame: pd.DataFrame, filters: dict[str, object]) -> pd.DataFrame:
    """Rows whose columns equal every given (non-None) filter value."""
    mask = np.ones(len(frame), dtype=bool)
    for column, value in filters.items():
        if value is not None:
            mask &= (frame[column] == value).to_numpy(dtype=bool, na_value=False)
    return frame[mask]


def rows_json(frame: pd.DataFrame, total: int) -> bytes:
    clean = frame.replace([math.inf, -math.inf], np.nan)
    rows = clean.to_json(orient="records", date_format="iso", date_unit="us", double_precision=15)
    return f'{{"total":{total},"returned":{len(frame)},"rows":{rows}}}'.encode()


def rows_parquet(frame: pd.DataFrame) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(to_table(frame), buffer, compression="zstd")
    return buffer.getvalue()


@router.get(
    "/results",
    response_model=ResultsPage,
    responses={
        **ERROR_RESPONSES,
        200: {
            "description": "trial rows: JSON (default), CSV or parquet (the trial schema)",
            "content": {
                "text/csv": {"schema": {"type": "string"}},
                PARQUET_MEDIA_TYPE: {"schema": {"type": "string", "format": "binary"}},
            },
        },
    },
    summary="Trial rows",
)
def results(
    index: IndexDep,
    gpu: GpuQuery = None,
    B: Dim = None,
    T: Dim = None,
    NH: Dim = None,
    NH_KV: Dim = None,
    HD: Dim = None,
    dtype: Text = None,
    family: Text = None,
    status: Text = None,
    format: Annotated[Literal["json", "csv", "parquet"], Query(description="response format")] = "json",
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="rows at most")] = DEFAULT_LIMIT,
) -> Response:
    """Every trial row (failed ones too) matching the filters, in the store's order. JSON
    shows non-finite times as null; CSV and parquet keep them."""
    filters = {
        "gpu": gpu,
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
    page = matching.head(limit)
    if format == "csv":
        return Response(
            page.to_csv(index=False),
            media_type="text/csv",
            headers={"Content-Disposition": 'attachment; filename="repkv-results.csv"'},
        )
    if format == "parquet":
        return Response(
            rows_parquet(page),
            media_type=PARQUET_MEDIA_TYPE,
            headers={"Content-Disposition": 'attachment; filename="repkv-results.parquet"'},
        )
    return Response(rows_json(page, len(matching)), media_type="application/json")
