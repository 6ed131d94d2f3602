"""GET /gpus and GET /shapes: what the results store holds."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from service.api.deps import GpuQuery, IndexDep
from service.api.errors import ERROR_RESPONSES, NotFound
from service.api.models import GpuModel, TunedShapeModel
from service.api.routes.best import shape_model

router = APIRouter(tags=["catalog"])


@router.get("/gpus", response_model=list[GpuModel], responses=ERROR_RESPONSES, summary="GPUs with results")
async def gpus(index: IndexDep) -> list[GpuModel]:
    return [
        GpuModel(
            label=s.label,
            gpu_names=list(s.gpu_names),
            compute_capability=s.compute_capability,
            sm_count=s.sm_count,
            trials=s.trials,
            ok_trials=s.ok_trials,
            tuned=s.tuned,
            dtypes=list(s.dtypes),
            last_measured=s.last_measured,
        )
        for s in index.gpus.values()
    ]


@router.get(
    "/shapes", response_model=list[TunedShapeModel], responses=ERROR_RESPONSES, summary="Tuned shapes"
)
async def shapes(
    index: IndexDep,
    gpu: GpuQuery = None,
    dtype: Annotated[str | None, Query(min_length=1, max_length=16)] = None,
) -> list[TunedShapeModel]:
    """Every tuned (GPU, shape, dtype) with at least one correct configuration, and its winner."""
    if gpu is not None and gpu not in index.gpus:
        raise NotFound(f"no results for GPU {gpu!r}", index.available_gpus())
    found = []
    for group in index.groups.values():
        if (gpu is not None and group.gpu != gpu) or (dtype is not None and group.dtype.name != dtype):
            continue
        best = group.best
        found.append(
            TunedShapeModel(
                gpu=group.gpu,
                shape=shape_model(group.shape),
                dtype=group.dtype.name,
                trials=group.trials,
                configurations=len(group.candidates),
                best_config=best.config_key,
                best_time_ms=best.time_ms,
                ratio_to_copy=best.ratio_to_copy,
                speedup_vs_baseline=group.baseline_ms / best.time_ms if group.baseline_ms else None,
            )
        )
    return found
