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
    """Ready once the results store is loaded. Lists the files loaded, every file skipped
    (temporary files are ignored; unreadable or corrupt ones are skipped with the reason), the
    rows dropped for failing validation (per file and reason), the files served from their last
    good copy, and the directories that do not exist; `warnings` says each in one line."""
    state = store.state
    if state is None:
        body = Readiness(ready=False, reload_interval_s=store.interval, last_error=store.last_error)
        return JSONResponse(status_code=503, content=body.model_dump(mode="json"))
    index = state.index
    report = index.report
    skipped = {
        _relative(p, store): why.replace(f"{store.directory}/", "") for p, why in report.skipped.items()
    }
    dropped = {_relative(p, store): reasons for p, reasons in report.dropped.items()}
    stale = {_relative(p, store): why for p, why in report.stale.items()}
    missing = list(store.missing)
    return Readiness(
        ready=True,
        generation=state.generation,
        loaded_at=index.loaded_at,
        load_seconds=state.load_seconds,
        directories=[str(d) for d in store.directories],
        files=[_relative(str(p), store) for p in report.files],
        skipped=skipped,
        dropped=dropped,
        dropped_rows=report.dropped_rows,
        stale=stale,
        missing_directories=missing,
        warnings=warnings(missing, skipped, dropped, stale, index.unusable_rows),
        rows=len(index.frame),
        tuned=len(index.groups),
        unusable_rows=index.unusable_rows,
        reload_interval_s=store.interval,
        last_error=store.last_error,
    )


def warnings(
    missing: list[str],
    skipped: dict[str, str],
    dropped: dict[str, dict[str, int]],
    stale: dict[str, str],
    unusable_rows: int,
) -> list[str]:
    lines = [f"results directory {d} does not exist: nothing is served from it" for d in missing]
    lines += [f"{name}: {why}" for name, why in stale.items()]
    lines += [f"{name} skipped: {why}" for name, why in skipped.items() if name not in stale]
    for name, reasons in dropped.items():
        total = sum(reasons.values())
        lines.append(
            f"{name}: {total} rows dropped ({'; '.join(f'{why}: {n}' for why, n in reasons.items())})"
        )
    if unusable_rows:
        lines.append(f"{unusable_rows} correct configurations name parameters the current code does not know")
    return lines
