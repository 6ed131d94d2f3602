"""How a dashboard route answers a bad query parameter: an HTML page naming it (422), not
FastAPI's JSON, and what OpenAPI says each status is."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from fastapi import HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, Response
from fastapi.routing import APIRoute

import variants
from service.api.models import ErrorBody
from service.dashboards import pages
from service.dashboards.urls import e, link

HTML_RESPONSES: dict[int | str, dict] = {
    200: {"content": {"text/html": {"schema": {"type": "string"}}}, "description": "an HTML page"},
    404: {"content": {"text/html": {"schema": {"type": "string"}}}, "description": "nothing to show"},
    422: {
        "content": {"text/html": {"schema": {"type": "string"}}},
        "description": "a query parameter is invalid: an HTML page naming it",
    },
    503: {"model": ErrorBody, "description": "the results are still loading"},
}


def error_page(status_code: int, problems: Sequence[Any], op: str | None = None) -> HTMLResponse:
    """The HTML page of a dashboard request with a bad query parameter: each problem (FastAPI's
    validation errors, or a message) on a line, with the status a JSON client would get; its
    links stay on op `op`."""
    items = []
    for problem in problems:
        if isinstance(problem, dict):
            where = ".".join(str(part) for part in problem.get("loc", ())[1:]) or "request"
            items.append(f"<li><code>{e(where)}</code>: {e(problem.get('msg', ''))}</li>")
        else:
            items.append(f"<li>{e(problem)}</li>")
    body = (
        f"<p>This page cannot be shown for these parameters:</p><ul>{''.join(items)}</ul>"
        f"<p>{link('Every tuned configuration', pages.overview_url(op=op))}</p>"
    )
    return HTMLResponse(pages.page("Invalid request", body, op=op), status_code=status_code)


def asked_op(request: Request) -> str | None:
    """The op a request names once and validly (its error page stays on it), else None."""
    given = [op.lower() for op in request.query_params.getlist("op")]
    return given[0] if len(given) == 1 and given[0] in variants.OPS else None


class HtmlErrorRoute(APIRoute):
    """A dashboard route: a bad query parameter (FastAPI's validation, or a 422 a dependency
    raises) is answered with `error_page`, not JSON; a browser shows it."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            try:
                return await handler(request)
            except RequestValidationError as exc:
                return error_page(422, exc.errors(), asked_op(request))
            except HTTPException as exc:
                if exc.status_code != 422:
                    raise
                detail = exc.detail
                return error_page(422, detail if isinstance(detail, list) else [detail], asked_op(request))

        return route
