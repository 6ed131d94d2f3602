"""GET /healthz (the process answers) and GET /readyz (the store is loaded; what was skipped)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

import variants
from results.listing import resolved
from results.store import bundled_results_dir
from service.api.deps import get_store
from service.api.models import Health, Readiness
from service.live_store import ResultsStore

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health, summary="Liveness")
async def healthz() -> Health:
    return Health(status="ok")


# How /readyz names the directories it reads: never by their place on the server.
RESULTS_NAME, BUNDLED_NAME = "results", "bundled"


@dataclass(frozen=True)
class Shown:
    """A directory the store reads, the name /readyz gives it, and what precedes the path of
    a file in it: nothing in the results directory, the name and a colon in the others."""

    directory: Path
    name: str
    prefix: str

    @property
    def bases(self) -> list[Path]:
        return list(dict.fromkeys([self.directory, resolved(self.directory)]))


def shown_directories(store: ResultsStore) -> list[Shown]:
    """Each directory the store reads as /readyz names it: "results" (the results directory),
    "bundled" (the results shipped with the package), or its own last component."""
    bundled = resolved(bundled_results_dir())
    shown: list[Shown] = []
    for i, directory in enumerate(store.directories):
        if i == 0:
            name = RESULTS_NAME
        elif resolved(directory) == bundled:
            name = BUNDLED_NAME
        else:
            name = directory.name or "directory"
        if any(s.name == name for s in shown):
            name = f"{name}-{i}"
        shown.append(Shown(directory, name, "" if i == 0 else f"{name}:"))
    return shown


def shown_path(path: str | Path, shown: list[Shown]) -> str:
    """A file as /readyz names it: relative to the results directory ("h100/run.parquet"), or
    to another directory read, after its name ("bundled:h200/run.parquet"); never absolute. A
    directory read is named as `scrubbed` names it ("<results>")."""
    path = Path(path)
    for directory in shown:
        for base in directory.bases:
            try:
                relative = path.relative_to(base)
            except ValueError:
                continue
            return f"<{directory.name}>" if relative == Path() else f"{directory.prefix}{relative}"
    return path.name


def scrubbed(text: str | None, shown: list[Shown]) -> str | None:
    """`text` (a reason, an error) with the directories' places on the server replaced by
    their names."""
    if text is None:
        return None
    for directory in shown:
        for base in directory.bases:
            if base.is_absolute():
                text = text.replace(f"{base}/", directory.prefix).replace(str(base), f"<{directory.name}>")
    return text


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
    shown = shown_directories(store)
    skipped = {shown_path(p, shown): scrubbed(why, shown) or "" for p, why in report.skipped.items()}
    dropped = {shown_path(p, shown): reasons for p, reasons in report.dropped.items()}
    stale = {shown_path(p, shown): why for p, why in report.stale.items()}
    names = {str(d.directory): d.name for d in shown}
    tuned = {op: len(index.for_op(op).groups) for op in variants.OPS}
    missing = [names.get(d, Path(d).name) for d in store.missing]
    return Readiness(
        ready=True,
        generation=state.generation,
        loaded_at=index.loaded_at,
        load_seconds=state.load_seconds,
        directories=[d.name for d in shown],
        files=[shown_path(p, shown) for p in report.files],
        skipped=skipped,
        dropped=dropped,
        dropped_rows=report.dropped_rows,
        stale=stale,
        missing_directories=missing,
        warnings=warnings(missing, skipped, dropped, stale, index.unusable_rows, report.duplicate_rows),
        rows=len(index.frame),
        tuned=sum(tuned.values()),
        tuned_by_op=tuned,
        unusable_rows=index.unusable_rows,
        reload_interval_s=store.interval,
        last_error=scrubbed(store.last_error, shown),
    )


def warnings(
    missing: list[str],
    skipped: dict[str, str],
    dropped: dict[str, dict[str, int]],
    stale: dict[str, str],
    unusable_rows: int,
    duplicate_rows: int = 0,
) -> list[str]:
    lines = [f"the {d} directory does not exist: nothing is served from it" for d in missing]
    lines += [f"{name}: {why}" for name, why in stale.items()]
    lines += [f"{name} skipped: {why}" for name, why in skipped.items() if name not in stale]
    for name, reasons in dropped.items():
        total = sum(reasons.values())
        lines.append(
            f"{name}: {total} rows dropped ({'; '.join(f'{why}: {n}' for why, n in reasons.items())})"
        )
    if duplicate_rows:
        lines.append(
            f"{duplicate_rows} rows were read more than once (the same trial in two files): counted once"
        )
    if unusable_rows:
        lines.append(f"{unusable_rows} correct configurations name parameters the current code does not know")
    return lines
