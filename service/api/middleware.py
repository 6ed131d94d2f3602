"""ASGI middleware of the app: HEAD answered on every GET route."""

from __future__ import annotations

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

HEAD_KEY = "repkv_tune.head"  # in the scope of a HEAD request run as GET


def is_head(request: Request) -> bool:
    """Whether the client asked only for the headers (a route may then skip making a body)."""
    return bool(request.scope.get(HEAD_KEY))


class HeadAsGet:
    """Answers HEAD wherever GET is answered (FastAPI's routes take GET only): the request runs
    as a GET and only its status and headers go out."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def headers_only(message: Message) -> None:
            if message["type"] == "http.response.body":
                if message.get("more_body", False):
                    return
                message = {**message, "body": b""}
            await send(message)

        await self.app({**scope, "method": "GET", HEAD_KEY: True}, receive, headers_only)
