"""Request dependencies: the current store index, and the validated shape and dtype."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Query, Request

import variants
from results.index import StoreIndex
from results.schema import L2State
from service.api.errors import NotReady, unprocessable
from service.live_store import ResultsStore
from variants import DType, Shape
from variants.shape import MAX_DIM

DEFAULT_NH, DEFAULT_NH_KV, DEFAULT_HD, DEFAULT_DTYPE = 32, 8, 128, "bf16"


async def get_store(request: Request) -> ResultsStore:
    return request.app.state.store


async def get_index(store: Annotated[ResultsStore, Depends(get_store)]) -> StoreIndex:
    state = store.state
    if state is None:
        raise NotReady
    return state.index


def _dim(description: str, default: int | None = None):
    if default is None:
        return Query(ge=1, le=MAX_DIM, description=description)
    return Query(ge=1, le=MAX_DIM, description=f"{description} (default {default})")


async def requested_shape(
    B: Annotated[int, _dim("batch size")],
    T: Annotated[int, _dim("sequence length")],
    NH: Annotated[int, _dim("query heads", DEFAULT_NH)] = DEFAULT_NH,
    NH_KV: Annotated[int, _dim("key/value heads; must divide NH", DEFAULT_NH_KV)] = DEFAULT_NH_KV,
    HD: Annotated[int, _dim("head dimension", DEFAULT_HD)] = DEFAULT_HD,
) -> Shape:
    try:
        return Shape(B, T, NH, NH_KV, HD)
    except variants.InvalidShape as exc:
        raise unprocessable("NH_KV" if NH % NH_KV else "B", str(exc)) from None


async def requested_dtype(
    dtype: Annotated[
        str, Query(min_length=1, max_length=16, description=f"one of {', '.join(variants.DTYPES)}")
    ] = DEFAULT_DTYPE,
) -> DType:
    try:
        return variants.get_dtype(dtype)
    except variants.UnknownDType as exc:
        raise unprocessable("dtype", str(exc), dtype) from None


GpuQuery = Annotated[
    str | None, Query(min_length=1, max_length=64, description="GPU label as given to the tuner, e.g. h100")
]
L2Query = Annotated[
    L2State,
    Query(
        description="what L2 holds when the kernel starts: cold (the tuner's default), or fed (dout "
        "just written by the kernel before, as in a training step: tuned with `--l2 fed`); a shape "
        "never tuned fed is served its cold ranking, and each answer's `l2` says which"
    ),
]
IndexDep = Annotated[StoreIndex, Depends(get_index)]
ShapeDep = Annotated[Shape, Depends(requested_shape)]
DTypeDep = Annotated[DType, Depends(requested_dtype)]
