"""GET /gpus, GET /shapes and GET /rule-quality: what the results store holds of one op
(`op`, default repkv_backward), and how well its nearest-shape answers have done."""

from __future__ import annotations

import weakref

from fastapi import APIRouter

import variants
from results.index import GpuSummary, StoreIndex, summarize_gpus
from results.leave_one_out import rule_quality_by_gpu
from results.schema import rows_of_op
from service.api.deps import DTypeFilter, GpuQuery, IndexDep, L2Query, OpQuery
from service.api.errors import ERROR_RESPONSES, NotFound
from service.api.models import GpuModel, GpuRuleQuality, TunedShapeModel
from service.api.routes.best import shape_model, tier_quality_model

router = APIRouter(tags=["catalog"])
# Per op index, its GPUs summed over that op's rows alone (they die with the index).
_SUMMARIES: weakref.WeakKeyDictionary[StoreIndex, dict[str, GpuSummary]] = weakref.WeakKeyDictionary()


def op_gpus(index: StoreIndex, op: str) -> tuple[StoreIndex, dict[str, GpuSummary]]:
    """The index of op `op` and the GPUs with rows of that op, their trials counted over those
    rows alone (`index.gpus` counts every op's)."""
    tuned = index.for_op(op)
    found = _SUMMARIES.get(tuned)
    if found is None:
        found = summarize_gpus(rows_of_op(tuned.frame, op), tuned.groups)
        _SUMMARIES[tuned] = found
    return tuned, found


def no_gpu(gpu: str, op: str, gpus: list[str]) -> NotFound:
    of = "" if op == variants.DEFAULT_OP else f" of {op}"
    return NotFound(f"no results{of} for GPU {gpu!r}", gpus)


@router.get("/gpus", response_model=list[GpuModel], responses=ERROR_RESPONSES, summary="GPUs with results")
async def gpus(index: IndexDep, op: OpQuery = variants.DEFAULT_OP) -> list[GpuModel]:
    """Every GPU with rows of op `op` (default repkv_backward): its device, the trials of that
    op it ran, and the (shape, dtype) of that op it tuned."""
    _, summaries = op_gpus(index, op)
    return [
        GpuModel(
            label=s.label,
            op=op,
            gpu_names=list(s.gpu_names),
            compute_capability=s.compute_capability,
            sm_count=s.sm_count,
            trials=s.trials,
            ok_trials=s.ok_trials,
            tuned=s.tuned,
            dtypes=list(s.dtypes),
            last_measured=s.last_measured,
        )
        for s in summaries.values()
    ]


@router.get(
    "/shapes", response_model=list[TunedShapeModel], responses=ERROR_RESPONSES, summary="Tuned shapes"
)
async def shapes(
    index: IndexDep,
    gpu: GpuQuery = None,
    dtype: DTypeFilter = None,
    op: OpQuery = variants.DEFAULT_OP,
) -> list[TunedShapeModel]:
    """Every tuned (GPU, shape, dtype) of op `op` (default repkv_backward) with at least one
    correct configuration, and its winner."""
    tuned, summaries = op_gpus(index, op)
    if gpu is not None and gpu not in summaries:
        raise no_gpu(gpu, op, sorted(summaries))
    found = []
    for group in tuned.groups.values():
        if (gpu is not None and group.gpu != gpu) or (dtype is not None and group.dtype.name != dtype):
            continue
        best = group.best
        found.append(
            TunedShapeModel(
                gpu=group.gpu,
                op=op,
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
async def rule_quality(
    index: IndexDep, gpu: GpuQuery = None, op: OpQuery = variants.DEFAULT_OP, l2: L2Query = "cold"
) -> list[GpuRuleQuality]:
    """Per GPU with results of op `op` (default repkv_backward), leave-one-out per tier: each
    tuned (shape, dtype) is left out and answered from the GPU's other tuned shapes by GET
    /best's rule; per tier answered from, how many, how many measured the served configuration
    themselves, and its slow-down against their own best (median, 90th percentile, worst). A
    nearest answer of /best carries its tier's row as `rule_quality`; with `l2=fed`, over
    the rankings GET /best?l2=fed serves (each tuned shape's fed one where it has one), as
    that answer's `rule_quality` is."""
    tuned = index.for_op(op).in_state(l2)
    if gpu is not None and gpu not in tuned.by_gpu:
        raise no_gpu(gpu, op, tuned.available_gpus())
    return [
        GpuRuleQuality(
            gpu=quality.gpu,
            op=op,
            tuned=quality.tuned,
            unanswered=quality.unanswered,
            tiers=[tier_quality_model(tier) for tier in quality.tiers],
        )
        for label, quality in sorted(rule_quality_by_gpu(tuned).items())
        if gpu is None or label == gpu
    ]
