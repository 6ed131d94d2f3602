"""ASGI middleware of the app: HEAD answered on every GET route, and the dashboard pages kept
while the store is unchanged."""

from __future__ import annotations

from collections import OrderedDict

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


class PageCache:
    """Sends a dashboard page asked for again as it was drawn, until the store reloads: drawing
    one from the bundled store takes up to a few seconds. Pages are keyed by the store's
    generation, the path and the query; the `max_pages` asked for last are kept. Only whole
    200 answers to a GET are kept (not a HEAD's, whose route may skip the body)."""

    def __init__(self, app: ASGIApp, prefix: str = "/dashboards", max_pages: int = 64) -> None:
        self.app = app
        self.prefix = prefix
        self.max_pages = max_pages
        self.pages: OrderedDict[tuple, tuple[Message, bytes]] = OrderedDict()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        page = scope["type"] == "http" and scope["method"] == "GET" and not scope.get(HEAD_KEY)
        state = scope["app"].state.store.state if page and scope["path"].startswith(self.prefix) else None
        if state is None:
            await self.app(scope, receive, send)
            return
        key = (state.generation, scope["path"], scope["query_string"])
        if key in self.pages:
            self.pages.move_to_end(key)
            start, body = self.pages[key]
            await send(_copied(start))
            await send({"type": "http.response.body", "body": body})
            return
        started: list[Message] = []
        chunks: list[bytes] = []

        async def keep(message: Message) -> None:
            if message["type"] == "http.response.start":
                started.append(_copied(message))  # as drawn: the middleware outside edits its headers
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
                if not message.get("more_body", False) and started and started[0]["status"] == 200:
                    self.pages[key] = (started[0], b"".join(chunks))
                    while len(self.pages) > self.max_pages:
                        self.pages.popitem(last=False)
            await send(message)

        await self.app(scope, receive, keep)


def _copied(start: Message) -> Message:
    return {**start, "headers": list(start.get("headers", []))}
