"""The FastAPI application: `create_app(settings)` wires the store, the routes and the docs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from starlette.middleware.gzip import DEFAULT_EXCLUDED_CONTENT_TYPES, GZipMiddleware

from service.api import errors
from service.api.deps import given_once
from service.api.middleware import HeadAsGet, PageCache
from service.api.routes import best, catalog, dashboards, docs, health, kernels, results
from service.live_store import ResultsStore
from service.settings import Settings

DESCRIPTION = """
Tuned configurations of llm.c's grouped-query-attention kernels, read from the results store:
`repkv_backward` (the default), `repkv_forward`, and RoPE fused into both directions,
`rope_repkv_forward` and `repkv_rope_backward` (pick one with `op=`).

`GET /best?B=8&T=1024` (or `&op=repkv_forward`, ...) answers with everything needed to compile
and launch the kernel:
source (via `/kernels/{source_hash}`), name expression, compile options, argument list,
grid and block. Dashboards are under `/dashboards`.
"""

# Responses of at least this many bytes are gzip-compressed for clients that accept it
# (plotly.js: 4.8 MB, 1.5 MB compressed); parquet is compressed already.
GZIP_MINIMUM_SIZE = 1024
GZIP_LEVEL = 6


def create_app(settings: Settings | None = None, store: ResultsStore | None = None) -> FastAPI:
    """The app. It loads the store in the background on startup and polls it for changes."""
    settings = settings or Settings()
    if store is None:
        primary, *beside = settings.read_dirs()
        store = ResultsStore(primary, interval=settings.reload_interval, beside=beside)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        store.start()
        try:
            yield
        finally:
            store.stop()

    app = FastAPI(
        title="repkv-tune",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # served by routes/docs.py, with local assets
        redoc_url=None,
        dependencies=[Depends(given_once)],  # a query parameter given twice: 422
    )
    app.state.store = store
    app.state.settings = settings
    errors.install(app)
    for module in (best, catalog, results, kernels, health, dashboards, docs):
        app.include_router(module.router)
    app.add_middleware(PageCache)  # inside gzip: kept as drawn, compressed as sent
    app.add_middleware(
        GZipMiddleware,
        minimum_size=GZIP_MINIMUM_SIZE,
        compresslevel=GZIP_LEVEL,
        exclude_content_types=(*DEFAULT_EXCLUDED_CONTENT_TYPES, results.PARQUET_MEDIA_TYPE),
    )
    app.add_middleware(HeadAsGet)  # outermost: a HEAD sees the headers a GET would
    return app
