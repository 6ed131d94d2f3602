"""GET /gpus, GET /shapes and GET /rule-quality: what the results store holds, and how well
its nearest-shape answers have done."""

from __future__ import annotations

from fastapi import APIRouter

from results.leave_one_out import rule_quality_by_gpu
from service.api.deps import DTypeFilter, GpuQuery, IndexDep
from service.api.errors import ERROR_RESPONSES, NotFound
from service.api.models import GpuModel, GpuRuleQuality, TunedShapeModel
from service.api.routes.best import shape_model, tier_quality_model

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
    dtype: DTypeFilter = None,
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


@router.get(
    "/rule-quality",
    response_model=list[GpuRuleQuality],
    responses=ERROR_RESPONSES,
    summary="How good nearest-shape answers have been",
)
async def rule_quality(index: IndexDep, gpu: GpuQuery = None) -> list[GpuRuleQuality]:
    """Per GPU with results, leave-one-out per tier: each tuned (shape, dtype) is left out and
    answered from the GPU's other tuned shapes by GET /best's rule; per tier answered from, how
    many, how many measured the served configuration themselves, and its slow-down against
    their own best (median, 90th percentile, worst). A nearest answer of /best carries its
    tier's row as `rule_quality`."""
    if gpu is not None and gpu not in index.by_gpu:
        raise NotFound(f"no results for GPU {gpu!r}", index.available_gpus())
    return [
        GpuRuleQuality(
            gpu=quality.gpu,
            tuned=quality.tuned,
            unanswered=quality.unanswered,
            tiers=[tier_quality_model(tier) for tier in quality.tiers],
        )
        for label, quality in sorted(rule_quality_by_gpu(index).items())
        if gpu is None or label == gpu
    ]
