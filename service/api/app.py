"""The FastAPI application: `create_app(settings)` wires the store, the routes and the docs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from service.api import errors
from service.api.routes import best, catalog, dashboards, health, kernels, results
from service.live_store import ResultsStore
from service.settings import Settings

DESCRIPTION = """
Tuned configurations of the repkv backward kernel (the backward pass of grouped-query
attention's K/V replication), read from the results store.

`GET /best?B=8&T=1024` answers with everything needed to compile and launch the kernel:
source (via `/kernels/{source_hash}`), name expression, compile options, argument list,
grid and block. Dashboards are under `/dashboards`.
"""


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

    app = FastAPI(title="repkv-tune", version="0.1.0", description=DESCRIPTION, lifespan=lifespan)
    app.state.store = store
    app.state.settings = settings
    errors.install(app)
    for module in (best, catalog, results, kernels, health, dashboards):
        app.include_router(module.router)
    return app
