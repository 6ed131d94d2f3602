"""What a study loop is asked to do (`StudyPlan`, under `default_study_name`) and what it did
(`StudyOutcome`)."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from results.schema import L2_COLD, hold_or_zero
from tuner.run.rows import objective_value
from variants import DEFAULT_OP, FAMILIES, Config, DType, Family, Shape, get_op

# why a study loop ended (`StudyOutcome.ended`)
BUDGET_MET = "budget met"
TARGET_MET = "target met"
EXHAUSTED = "space exhausted"
TIMED_OUT = "timed out"


@dataclass(frozen=True)
class StudyPlan:
    gpu: str
    shape: Shape
    dtype: DType
    study_name: str
    sampler: str = "tpe"
    seed: int | None = None
    trials: int | None = 40  # distinct configurations; None: all of them
    timeout_s: float | None = None
    target_value: float | None = None  # stop once the best objective is at or below it
    ahead: int = 1  # trials asked (and their kernels compiled) at once (`tuner.study.ask_ahead`)
    warm_start: tuple[Config, ...] = ()  # queued first, before the baseline (`tuner.study.warm_start`)


@dataclass
class StudyOutcome:
    plan: StudyPlan
    copy_ms: float
    space_size: int
    rows: dict[str, dict[str, Any]] = field(default_factory=dict)  # config key -> row
    measured: list[tuple[str, float]] = field(default_factory=list)  # (key, value), in order
    answered: int = 0
    invalid: int = 0
    yielded: int = 0
    missing: int = 0
    failures: dict[str, int] = field(default_factory=dict)  # status -> count
    trials: int = 0  # Optuna trials this process asked for
    reaped: int = 0  # trials of dead workers failed (and queued again) by this process
    again: int = 0  # leaders of other studies measured again after it (`tuner.run.leaders`)
    interrupted: bool = False
    held: int = 0  # distinct configurations the study held, by the budget's count, when opened
    goal: int = 0  # distinct configurations the budget asks for
    ended: str | None = None  # why the loop ended (BUDGET_MET ... TIMED_OUT), None if it never ran

    @property
    def best_value(self) -> float:
        values = [objective_value(r) for r in self.rows.values()]
        return min(values, default=math.inf)


ProgressHook = Callable[[int, int, float], None]  # (distinct done, goal, best value)


def kernels_hash(families: Mapping[str, Family] | None = None) -> str:
    registry = FAMILIES if families is None else families
    joined = ",".join(f"{n}:{f.source_hash}" for n, f in sorted(registry.items()))
    return hashlib.sha256(joined.encode()).hexdigest()[:8]


def default_study_name(
    gpu: str,
    shape: Shape,
    dtype: DType,
    prefix: str | None = None,
    families: Sequence[str] = (),
    hold_us: float | None = None,
    l2: str | None = None,
    op: str = DEFAULT_OP,
) -> str:
    """'repkv-<kernels>/h200/B=8,T=1024,NH=32,NH_KV=8,HD=128/bf16/hold150us' (another op than
    repkv_backward: '<op>-<its kernels>/...'). The kernel
    sources' hash is part of the default prefix: edited kernels start a fresh study. A search
    of some families only ('.../bf16/tile,split/hold150us') is a study of its own: its space
    differs; so is a study timed with another hold (none: no suffix) or with L2 fed
    ('.../hold150us/fed'), whose values differ."""
    if prefix is None:
        prefix = (
            f"repkv-{kernels_hash()}" if op == DEFAULT_OP else f"{op}-{kernels_hash(get_op(op).families)}"
        )
    elif op != DEFAULT_OP:
        prefix = f"{prefix}/{op}"
    name = f"{prefix}/{gpu}/{shape.key}/{dtype.name}"
    if families:
        name = f"{name}/{','.join(families)}"
    hold = hold_or_zero(hold_us)
    if hold:
        name = f"{name}/hold{hold:g}us"
    return f"{name}/{l2}" if l2 is not None and l2 != L2_COLD else name
