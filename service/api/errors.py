"""Errors the routes raise, and how they become responses (never a 500 for bad input)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse

from service.api.models import ErrorBody
from variants.errors import RepkvTuneError

MAX_AVAILABLE = 200  # names listed in a 404 at most

ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorBody, "description": "nothing matches; `available` lists what does"},
    503: {"model": ErrorBody, "description": "the results are still loading"},
}


class NotFound(RepkvTuneError):
    def __init__(self, detail: str, available: Iterable[str] = ()) -> None:
        super().__init__(detail)
        self.detail = detail
        self.available = list(available)[:MAX_AVAILABLE]


class NotReady(RepkvTuneError):
    pass


def unprocessable(field: str, message: str, value: Any = None) -> HTTPException:
    """A 422 shaped like FastAPI's own validation errors, so one schema describes both."""
    return HTTPException(
        status_code=422,
        detail=[{"loc": ["query", field], "msg": message, "type": "value_error", "input": value}],
    )


def install(app: FastAPI) -> None:
    @app.exception_handler(NotFound)
    async def not_found(request: Request, exc: NotFound) -> JSONResponse:
        return JSONResponse(
            status_code=404, content=ErrorBody(detail=exc.detail, available=exc.available).model_dump()
        )

    @app.exception_handler(NotReady)
    async def not_ready(request: Request, exc: NotReady) -> JSONResponse:
        body = ErrorBody(detail="the results store is still loading; retry shortly (see /readyz)")
        return JSONResponse(status_code=503, content=body.model_dump(), headers={"Retry-After": "1"})
