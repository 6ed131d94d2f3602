"""Pydantic models of the HTTP API (and only of it: the rest of the service uses dataclasses)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from results.schema import L2State


class ShapeModel(BaseModel):
    B: int
    T: int
    NH: int
    NH_KV: int
    HD: int


class KernelRecipe(BaseModel):
    """Everything needed to compile and launch the kernel for the requested shape:

    module = cupy.RawModule(code=source, options=tuple(compile_options),
                            name_expressions=[name_expression])
    kernel = module.get_function(name_expression)
    kernel((grid,), (block,), (dinp, dout, B, T, NH, NH_KV, HD))
    """

    family: str
    params: dict[str, Any]
    config_key: str
    name_expression: str = Field(description="the template instantiation, also CuPy's name expression")
    kernel_arguments: str = Field(description="the kernel's parameter list (T is the element type)")
    compile_options: list[str]
    source_hash: str = Field(description="hash of the family's current source")
    source_url: str = Field(description="GET this path for the CUDA source")
    source: str | None = Field(None, description="the CUDA source itself, with include_source=true")
    grid: int = Field(description="blocks (1-D grid) for the requested shape")
    block: int = Field(description="threads per block")
    min_compute_capability: int = Field(
        0,
        description="the oldest GPU the kernel runs on, as 10*major + minor (90: Hopper, "
        "whose bulk copy the bulk family uses); 0: any. Compiled for an older GPU it traps",
    )


class Measurement(BaseModel):
    """What was measured for this configuration at the tuned shape it comes from."""

    time_ms: float = Field(description="median kernel time")
    p20_ms: float | None = None
    p80_ms: float | None = None
    gbps: float | None = None
    frac_peak: float | None = Field(
        None,
        description="gbps over the GPU's peak DRAM bandwidth (results/peaks.py; null for a GPU not "
        "listed): below about 32 MB read this rather than ratio_to_copy, whose copy has a fixed cost",
    )
    ratio_to_copy: float | None = Field(
        None,
        description="time over a device copy of the same bytes (the faster of cudaMemcpyAsync and a "
        "16-byte copy kernel; rows timed before that: cudaMemcpyAsync alone)",
    )
    empty_launch_ms: float | None = Field(
        None, description="an empty kernel's launch in the same run, timed alike (null: not measured)"
    )
    ratio_to_empty_launch: float | None = Field(
        None, description="time over empty_launch_ms: how far above a launch's fixed cost the kernel is"
    )
    hold_us: float = Field(
        0.0,
        description="the GPU-side wait after each L2 flush before a timed call (µs; 0: none). The "
        "tuner holds 150 by default, and a group's rows timed so are served ahead of rows timed otherwise",
    )
    copy_method: str | None = Field(
        None,
        description='how the copy of ratio_to_copy was timed: "fastest" (the faster of cudaMemcpyAsync and '
        "a 16-byte copy kernel), or null (cudaMemcpyAsync alone: rows timed before)",
    )
    baseline_ms: float | None = Field(None, description="llm.c's kernel1 at block 128, same GPU and shape")
    speedup_vs_baseline: float | None = None
    gpu_name: str | None = None
    sm_count: int | None = None
    measured_at: datetime | None = None
    source_hash: str | None = Field(None, description="hash of the source the time was measured with")
    source_current: bool = Field(description="whether that source is the family's current source")
    run_id: str


class TierQualityModel(BaseModel):
    """Leave-one-out at one tier: each tuned (shape, dtype) of the GPU was left out and
    answered from the others; these are the ones answered from this tier, and the slow-down
    of the configuration they were served against their own measured best."""

    tier: int
    held_out: int = Field(description="tuned (shape, dtype) that, left out, were answered from this tier")
    judged: int = Field(description="of those, the ones that measured the served configuration themselves")
    not_judged: int = Field(
        description="of those, the ones that never measured the served configuration (no slow-down known)"
    )
    median_slowdown: float | None = Field(
        description="served time / the left-out shape's best time, median over the judged ones "
        "(1.0: the served configuration was its best); null with `reason` when none was judged"
    )
    p90_slowdown: float | None = Field(description="90th percentile (linear between order statistics)")
    worst_slowdown: float | None
    reason: str | None = Field(description="why the slow-downs are null; null when they are given")


class GpuRuleQuality(BaseModel):
    gpu: str
    op: str = Field(default="repkv_backward", description="the kernel whose answers these are (variants.OPS)")
    tuned: int = Field(
        description="tuned (shape, dtype), each left out in turn (not those searched with one family only)"
    )
    unanswered: int = Field(description="of those, the ones that no other tuned shape could serve")
    tiers: list[TierQualityModel] = Field(description="tiers 0, 1 and 2, in order")


class BestAnswer(BaseModel):
    gpu: str
    measured_gpu: str = Field(
        description="the GPU the configuration was measured on: `gpu`, unless other_gpus=true "
        "answered a GPU without results from another one"
    )
    shape: ShapeModel = Field(description="the requested shape")
    dtype: str
    match: Literal["exact", "partial", "nearest"] = Field(
        description="exact: this shape and dtype were tuned on the GPU; partial: they were, but "
        "only one kernel family was searched there while others can serve them (`python -m tuner "
        "--family`), so a faster family may exist; nearest: served from the nearest tuned shape, "
        "or from another GPU's results (other_gpus=true: `measured_gpu` names it) even at this shape"
    )
    tuned_shape: ShapeModel = Field(description="the tuned shape the configuration was measured at")
    tuned_dtype: str
    tier: int = Field(
        description="0: same dtype and head layout (NH, NH_KV, HD) as the tuned shape; 1: same "
        "dtype, another layout; 2: another dtype (an exact or partial match is tier 0)"
    )
    distance: float = Field(description="0 for an exact or partial match; see the service's README section")
    rank: int = Field(description="0 when the tuned shape's winner is served, n for its n-th runner-up")
    l2: L2State = Field(
        "cold",
        description="the L2 state the configuration was tuned in: cold (flushed before each call), or "
        "fed (dout written just before, as in a training step); l2=fed is answered from the fed "
        "ranking of the tuned shape where it has one, its cold ranking otherwise",
    )
    is_copy: bool = Field(
        False,
        description="true where NH == NH_KV and the op's output holds its input's bytes unchanged "
        "(repkv_forward, repkv_backward): a device copy of them is the op, and the exported header "
        "and the PyTorch op copy instead of launching `kernel`; `kernel` is served for callers "
        "that launch one themselves",
    )
    kernel: KernelRecipe
    measured: Measurement
    rule_quality: TierQualityModel | None = Field(
        None,
        description="for a nearest answer, how nearest answers of its tier have done on the "
        "results of `measured_gpu` (leave-one-out, within that GPU: nothing about answering one "
        "GPU from another's results); null for an exact or partial match",
    )


class BestResponse(BaseModel):
    """GET /best's answer, with `gpu` or without: `answers[0]` is the asked GPU's."""

    op: str = Field(default="repkv_backward", description="the kernel answered for (variants.OPS)")
    shape: ShapeModel = Field(description="the requested shape")
    dtype: str
    answers: list[BestAnswer] = Field(
        description="with `gpu`, that GPU's answer alone; without, one per GPU that can serve the "
        "shape, in label order (each names its `gpu`)"
    )


class ErrorBody(BaseModel):
    detail: str
    available: list[str] = Field(default_factory=list, description="what can be asked for instead")


class GpuModel(BaseModel):
    label: str
    op: str = Field(default="repkv_backward", description="the kernel whose rows these count (variants.OPS)")
    gpu_names: list[str]
    compute_capability: str | None
    sm_count: int | None
    trials: int
    ok_trials: int
    tuned: int = Field(description="(shape, dtype) pairs with at least one correct configuration")
    dtypes: list[str]
    last_measured: datetime | None


class TunedShapeModel(BaseModel):
    gpu: str
    op: str = Field(default="repkv_backward", description="the kernel tuned (variants.OPS)")
    shape: ShapeModel
    dtype: str
    trials: int
    configurations: int = Field(description="distinct correct configurations measured")
    best_config: str
    best_time_ms: float
    ratio_to_copy: float | None
    speedup_vs_baseline: float | None


class TrialRow(BaseModel):
    """One trial row (see results/schema.py); non-finite times are null in JSON."""

    model_config = {"extra": "allow"}

    gpu: str
    op: str = Field(default="repkv_backward", description="the kernel measured (variants.OPS)")
    B: int
    T: int
    NH: int
    NH_KV: int
    HD: int
    dtype: str
    family: str
    params: str
    config_key: str
    status: str
    time_ms: float | None
    run_id: str


class ResultsPage(BaseModel):
    total: int = Field(description="rows matching the filters")
    returned: int = Field(description="rows in this response")
    offset: int = Field(description="matching rows skipped before these")
    next: str | None = Field(
        description="the next page, as a path and query relative to this server; null on the last one"
    )
    rows: list[TrialRow]


class Health(BaseModel):
    status: Literal["ok"]


class Readiness(BaseModel):
    ready: bool
    generation: int = Field(0, description="increments on every reload")
    loaded_at: datetime | None = None
    load_seconds: float | None = None
    directories: list[str] = Field(
        default_factory=list, description="directories read: the results directory, then the bundled results"
    )
    files: list[str] = Field(
        default_factory=list,
        description="files loaded, relative to the results directory (absolute when outside it)",
    )
    skipped: dict[str, str] = Field(default_factory=dict, description="unreadable files and why")
    dropped: dict[str, dict[str, int]] = Field(
        default_factory=dict,
        description="per file, the rows left out for failing validation: reason -> rows",
    )
    dropped_rows: int = Field(0, description="rows left out for failing validation, in all")
    stale: dict[str, str] = Field(
        default_factory=dict,
        description="files served from their last good copy (the current one is unreadable or all bad)",
    )
    missing_directories: list[str] = Field(
        default_factory=list, description="directories to read that do not exist (nothing served from them)"
    )
    warnings: list[str] = Field(
        default_factory=list, description="one line per problem above, for a person to read"
    )
    rows: int = Field(0, description="trial rows loaded, of every op")
    tuned: int = Field(0, description="tuned (GPU, shape, dtype) groups, of every op")
    tuned_by_op: dict[str, int] = Field(default_factory=dict, description="tuned groups per op")
    unusable_rows: int = Field(0, description="ok rows of families or parameters the code no longer knows")
    reload_interval_s: float
    last_error: str | None = None
