"""Request dependencies: the current store index, and the validated shape and dtype."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import Depends, Query, Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from pydantic import AfterValidator, BeforeValidator

import variants
from results.index import StoreIndex
from results.schema import L2State, check_gpu_label
from service.api.errors import NotReady, unprocessable
from service.live_store import ResultsStore
from variants import DType, Shape
from variants.shape import MAX_DIM

DEFAULT_NH, DEFAULT_NH_KV, DEFAULT_HD, DEFAULT_DTYPE = 32, 8, 128, "bf16"


def fold_case(value: object) -> object:
    """Every name a query takes is lower case: `gpu=H200` means h200, `dtype=BF16` bf16, `op=`,
    `l2=` and `format=` alike."""
    return value.lower() if isinstance(value, str) else value


# The dtype names, declared as an enum in the OpenAPI schema (a name outside it: 422, naming them).
DTypeName = Literal[tuple(variants.DTYPES)]  # type: ignore[valid-type]
DTypeQuery = Annotated[
    DTypeName,
    BeforeValidator(fold_case),
    Query(description=f"element type, one of {', '.join(variants.DTYPES)} (any case)"),
]
DTypeFilter = Annotated[
    DTypeName | None,
    BeforeValidator(fold_case),
    Query(description=f"only this element type, one of {', '.join(variants.DTYPES)} (any case)"),
]


def _query_names(dependant: Dependant) -> frozenset[str]:
    """The query parameters a route takes, its dependencies' included."""
    names = {field.alias for field in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _query_names(sub)
    return frozenset(names)


def given_once(request: Request) -> None:
    """Every route's: a query parameter given more than once is a 422 naming it (else the last
    value would be taken silently: `?B=8&T=1024&B=9` answered for B=9); so is one the route does
    not take (else ignored: `?B=8&T=1024&hd=64` answered for the default HD=128), on every
    route the OpenAPI documents (not the docs' pages and assets, where a client may add its own)."""
    params = request.query_params
    route = request.scope.get("route")
    if isinstance(route, APIRoute) and route.include_in_schema:
        known = _query_names(route.dependant)
        for name in dict.fromkeys(params.keys()):
            if name not in known:
                takes = ", ".join(sorted(known, key=str.lower)) or "none"
                message = f"{name} is not a parameter of {route.path} (it takes: {takes})"
                raise unprocessable(name, message, params.get(name))
    for name in dict.fromkeys(params.keys()):
        values = params.getlist(name)
        if len(values) > 1:
            shown = ", ".join(repr(v) for v in values)
            raise unprocessable(name, f"{name} is given {len(values)} times ({shown}): give it once", values)


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
    """The shape asked for; a 422 naming the limit (variants.shape) of one that cannot be served."""
    given = {"B": B, "T": T, "NH": NH, "NH_KV": NH_KV, "HD": HD}
    try:
        return Shape(**given)
    except variants.InvalidShape as exc:
        raise unprocessable(exc.field, str(exc), given.get(exc.field)) from None


def check_op_serves(op: str, shape: Shape) -> None:
    """A 422 naming the dimension where the op's own rule refuses the shape (`Op.rejection`:
    the RoPE ops rotate pairs, so an odd HD), which no tuning could ever serve."""
    refused = variants.get_op(op).rejection(shape)
    if refused is not None:
        raise unprocessable(refused[0], f"{op} cannot run {shape}: {refused[1]}", getattr(shape, refused[0]))


async def requested_dtype(dtype: DTypeQuery = DEFAULT_DTYPE) -> DType:
    return variants.get_dtype(dtype)


def gpu_label(value: str | None) -> str | None:
    """A GPU label asked for, held to the rule every label is (results.schema.check_gpu_label)."""
    return value if value is None else check_gpu_label(value)


GpuQuery = Annotated[
    str | None,
    BeforeValidator(fold_case),
    AfterValidator(gpu_label),
    Query(min_length=1, max_length=64, description="GPU label as given to the tuner, e.g. h100 (any case)"),
]


def op_name(value: str | None) -> str | None:
    """An op asked for: one of variants.OPS as registered when the request comes (a 422 naming
    them otherwise), so that an op registered after this module was imported is served too."""
    if value is not None and value not in variants.OPS:
        raise ValueError(f"unknown op {value!r}; expected one of {', '.join(map(repr, variants.OPS))}")
    return value


_OP_SCHEMA = {"enum": list(variants.OPS)}  # what the OpenAPI schema lists: the ops known at start
OpQuery = Annotated[
    str,
    BeforeValidator(fold_case),
    AfterValidator(op_name),
    Query(
        description=f"the kernel, one of {', '.join(variants.OPS)} (any case; default {variants.DEFAULT_OP})",
        json_schema_extra=_OP_SCHEMA,
    ),
]
OpFilter = Annotated[
    str | None,
    BeforeValidator(fold_case),
    AfterValidator(op_name),
    Query(
        description=f"only this kernel's rows, one of {', '.join(variants.OPS)} (any case)",
        json_schema_extra=_OP_SCHEMA,
    ),
]
L2Query = Annotated[
    L2State,
    BeforeValidator(fold_case),
    Query(
        description="what L2 holds when the kernel starts (any case): cold (the tuner's default), or "
        "fed (dout just written by the kernel before, as in a training step: tuned with `--l2 fed`); a shape "
        "never tuned fed is served its cold ranking, and each answer's `l2` says which"
    ),
]
IndexDep = Annotated[StoreIndex, Depends(get_index)]
ShapeDep = Annotated[Shape, Depends(requested_shape)]
DTypeDep = Annotated[DType, Depends(requested_dtype)]
