"""GET /best: the configuration to compile and launch for a shape, per GPU."""

from __future__ import annotations

import weakref
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import Response

import variants
from results.bounded_cache import CHOICE_CACHE_SIZE, BoundedCache
from results.index import StoreIndex
from results.leave_one_out import TierQuality, rule_quality
from results.peaks import frac_peak
from results.schema import L2_COLD
from results.selection import Choice, select
from service.api.deps import DTypeDep, GpuQuery, IndexDep, L2Query, OpQuery, ShapeDep, check_op_serves
from service.api.errors import ERROR_RESPONSES, NotFound
from service.api.models import (
    BestAnswer,
    BestResponse,
    KernelRecipe,
    Measurement,
    ShapeModel,
    TierQualityModel,
)
from service.nothing_served import no_results
from variants import DType, Shape

router = APIRouter(tags=["best"])
# The JSON bodies already answered, per index (they die with it); apart from the choices
# that results.selection caches on the index.
_BODIES: weakref.WeakKeyDictionary[StoreIndex, BoundedCache] = weakref.WeakKeyDictionary()


def shape_model(shape: Shape) -> ShapeModel:
    return ShapeModel(B=shape.B, T=shape.T, NH=shape.NH, NH_KV=shape.NH_KV, HD=shape.HD)


def tier_quality_model(quality: TierQuality) -> TierQualityModel:
    return TierQualityModel(
        tier=quality.tier,
        held_out=quality.held_out,
        judged=quality.judged,
        not_judged=quality.not_judged,
        median_slowdown=quality.median_slowdown,
        p90_slowdown=quality.p90_slowdown,
        worst_slowdown=quality.worst_slowdown,
        reason=quality.reason,
    )


def answer_quality(index: StoreIndex, choice: Choice) -> TierQualityModel | None:
    """Leave-one-out at the answer's tier on the GPU that measured it; None when exact or
    partial (measured at this very shape, not a nearest answer)."""
    if choice.match in ("exact", "partial"):
        return None
    return tier_quality_model(rule_quality(index, choice.group.gpu).at(choice.tier))


def answer(
    index: StoreIndex, gpu: str, shape: Shape, dtype: DType, choice: Choice, include_source: bool
) -> BestAnswer:
    recipe, candidate, group = choice.recipe, choice.candidate, choice.group
    baseline = group.baseline_ms
    return BestAnswer(
        gpu=gpu,
        measured_gpu=group.gpu,
        shape=shape_model(shape),
        dtype=dtype.name,
        match=choice.match,
        tuned_shape=shape_model(group.shape),
        tuned_dtype=group.dtype.name,
        tier=choice.tier,
        distance=choice.distance,
        rank=choice.rank,
        l2=choice.group.l2,
        is_copy=shape.NH == shape.NH_KV and variants.get_op(index.op).copies_without_replicas,
        kernel=KernelRecipe(
            family=recipe.family,
            params=recipe.params,
            config_key=recipe.config_key,
            name_expression=recipe.name_expression,
            kernel_arguments=recipe.kernel_arguments,
            compile_options=list(recipe.compile_options),
            source_hash=recipe.source_hash,
            source_url=f"/kernels/{recipe.source_hash}",
            source=candidate.family.source if include_source else None,
            grid=recipe.grid,
            block=recipe.block,
            min_compute_capability=recipe.min_compute_capability,
        ),
        measured=Measurement(
            time_ms=candidate.time_ms,
            p20_ms=candidate.p20_ms,
            p80_ms=candidate.p80_ms,
            gbps=candidate.gbps,
            frac_peak=frac_peak(candidate.gbps, candidate.gpu_name),
            ratio_to_copy=candidate.ratio_to_copy,
            empty_launch_ms=candidate.empty_launch_ms,
            ratio_to_empty_launch=candidate.time_ms / candidate.empty_launch_ms
            if candidate.empty_launch_ms
            else None,
            hold_us=candidate.hold_us,
            copy_method=candidate.copy_method,
            baseline_ms=baseline,
            speedup_vs_baseline=baseline / candidate.time_ms if baseline else None,
            gpu_name=candidate.gpu_name,
            sm_count=candidate.sm_count,
            measured_at=candidate.timestamp,
            source_hash=candidate.source_hash,
            source_current=recipe.source_current,
            run_id=candidate.run_id,
        ),
        rule_quality=answer_quality(index, choice),
    )


def tuned_names(index: StoreIndex, gpu: str | None = None) -> list[str]:
    return [
        f"gpu={key[0]} B={s[0]} T={s[1]} NH={s[2]} NH_KV={s[3]} HD={s[4]} dtype={key[2]}"
        for key in index.groups
        for s in [key[1]]
        if gpu is None or key[0] == gpu
    ]


@router.get(
    "/best",
    response_model=BestResponse,
    responses=ERROR_RESPONSES,
    summary="Best configuration for a shape",
)
async def best(
    index: IndexDep,
    shape: ShapeDep,
    dtype: DTypeDep,
    gpu: GpuQuery = None,
    include_source: Annotated[bool, Query(description="embed the CUDA source in the answer")] = False,
    other_gpus: Annotated[
        bool,
        Query(description="answer a GPU without results from the other GPUs' measurements"),
    ] = False,
    l2: L2Query = "cold",
    op: OpQuery = variants.DEFAULT_OP,
) -> Response:
    """The fastest correct configuration of op `op` (default repkv_backward) for
    (B, T, NH, NH_KV, HD, dtype).

    NH, NH_KV, HD and dtype default to 32, 8, 128 and bf16. One response shape either way:
    `answers` holds, with `gpu`, that GPU's answer alone (`answers[0]`); without, one answer
    per GPU that has results, in label order. `match` is "exact" when this shape and
    dtype were tuned on that GPU, "partial" when they were but with one kernel family searched
    where others serve them (a faster family may exist); otherwise "nearest" names the tuned
    shape the configuration comes from, its tier and distance, and `rule_quality` how nearest
    answers of that tier did when each tuned shape of the GPU was left out and answered from
    the others (see `/rule-quality`). Measured figures are those of the tuned shape. With `l2=fed`, each
    tuned shape's ranking with dout already in L2 (`python -m tuner --l2 fed`) where it has
    one, its cold ranking otherwise; `l2` in each answer says which.
    """
    check_op_serves(op, shape)
    bodies = _BODIES.get(index)
    if bodies is None:
        bodies = _BODIES.setdefault(index, BoundedCache(CHOICE_CACHE_SIZE))
    key = (gpu, shape, dtype.name, include_source, other_gpus, l2, op)
    body = bodies.get(key)
    if body is None:
        answer_ = best_answer(index, shape, dtype, gpu, include_source, other_gpus, l2, op)
        body = bodies.put(key, answer_.model_dump_json().encode())
    return Response(body, media_type="application/json")


def best_answer(
    index: StoreIndex,
    shape: Shape,
    dtype: DType,
    gpu: str | None,
    include_source: bool,
    other_gpus: bool = False,
    l2: str = L2_COLD,
    op: str = variants.DEFAULT_OP,
) -> BestResponse:
    """The answer of GET /best (raises NotFound); the route memoizes its JSON per index. Each
    tuned (GPU, shape, dtype) serves its rows of L2 state `l2`, or its cold ones where it has
    none (`StoreIndex.in_state`)."""
    index = index.for_op(op).in_state(l2)
    if not index.groups:  # before any GPU: no other GPU's results could answer either
        raise NotFound(no_results(index, op))
    if gpu is not None:
        if gpu not in index.by_gpu and not (other_gpus and index.by_gpu):
            raise NotFound(
                f"no results for GPU {gpu!r} (add other_gpus=true to be answered from another GPU's)",
                index.available_gpus(),
            )
        choice = select(index, gpu, shape, dtype, other_gpus)
        if choice is None:
            raise NotFound(
                f"no tuned configuration of GPU {gpu!r} can serve {shape} {dtype.name}",
                tuned_names(index, gpu),
            )
        answers = [answer(index, gpu, shape, dtype, choice, include_source)]
        return BestResponse(op=op, shape=shape_model(shape), dtype=dtype.name, answers=answers)
    answers = []
    for label in index.available_gpus():
        choice = select(index, label, shape, dtype)
        if choice is not None:
            answers.append(answer(index, label, shape, dtype, choice, include_source))
    if not answers:
        raise NotFound(f"no tuned configuration can serve {shape} {dtype.name}", tuned_names(index))
    return BestResponse(op=op, shape=shape_model(shape), dtype=dtype.name, answers=answers)
