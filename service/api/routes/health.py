"""GET /healthz (the process answers) and GET /readyz (the store is loaded; what was skipped)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

from service.api.deps import get_store
from service.api.models import Health, Readiness
from service.live_store import ResultsStore

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health, summary="Liveness")
async def healthz() -> Health:
    return Health(status="ok")


def _relative(path: str, store: ResultsStore) -> str:
    try:
        return str(Path(path).relative_to(store.directory))
    except ValueError:
        return str(path)


@router.get(
    "/readyz",
    response_model=Readiness,
    responses={503: {"model": Readiness, "description": "not loaded yet"}},
    summary="Readiness and load report",
)
async def readyz(store: Annotated[ResultsStore, Depends(get_store)]) -> Readiness | JSONResponse:
    """Ready once the results store is loaded. Lists the files loaded and every file skipped
    (temporary files are ignored; unreadable or corrupt ones are skipped with the reason)."""
    state = store.state
    if state is None:
        body = Readiness(ready=False, reload_interval_s=store.interval, last_error=store.last_error)
        return JSONResponse(status_code=503, content=body.model_dump(mode="json"))
    index = state.index
    return Readiness(
        ready=True,
        generation=state.generation,
        loaded_at=index.loaded_at,
        load_seconds=state.load_seconds,
        directories=[str(d) for d in store.directories],
        files=[_relative(str(p), store) for p in index.report.files],
        skipped={
            _relative(p, store): why.replace(f"{store.directory}/", "")
            for p, why in index.report.skipped.items()
        },
        rows=len(index.frame),
        tuned=len(index.groups),
        unusable_rows=index.unusable_rows,
        reload_interval_s=store.interval,
        last_error=store.last_error,
    )
