"""What `python -m tuner tune` is asked (`TuneRequest`, mirroring its flags) and what it returns
(`TuneResult`); the request's checks and its one study plan per shape and dtype."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from results.schema import DEFAULT_HOLD_US, L2_COLD, L2_STATES, SHAPE_COLUMNS
from tuner.cli.arguments import SEED_MAX
from tuner.cli.presets import DEFAULT_SHAPES, DEFAULT_TRIALS
from tuner.study.ask_ahead import AHEAD
from tuner.study.loop import HEARTBEAT_S
from tuner.study.plan import StudyOutcome, StudyPlan, default_study_name
from tuner.study.warm_start import WARM_START_SIZE
from variants import DEFAULT_OP, DTYPES, Shape
from variants.errors import RepkvTuneError


class TuneError(RepkvTuneError, ValueError):
    """A request that cannot run: the message says what to do."""


@dataclass(frozen=True)
class TuneRequest:
    """What to tune and how; each field mirrors a flag of `python -m tuner tune`."""

    shapes: tuple[Shape, ...] = DEFAULT_SHAPES
    dtypes: tuple[str, ...] = tuple(DTYPES)  # names: fp32, bf16, fp16
    gpu: str | None = None  # label; default from the device name (replay: the recording's only one)
    force_gpu_label: bool = False  # accept a label that names another GPU than the device
    sampler: str = "tpe"
    seed: int | None = None  # None: a fresh one, recorded in every row
    trials: int = DEFAULT_TRIALS  # distinct configurations per shape and dtype (grid: all)
    timeout_s: float | None = None  # per shape and dtype
    study: str | None = None  # study name prefix (the whole name for one shape and dtype)
    storage: str | None = None  # Optuna storage URL; default sqlite in the results directory
    results_dir: Path | None = None  # None: the user's results directory, or nothing with replay_dir
    replay_dir: Path | None = None  # answer trials from recorded parquet (no GPU)
    device: int = 0  # CUDA device index
    trial_timeout_s: float = 10.0  # seconds before a hung kernel's worker is killed
    hold_us: float = DEFAULT_HOLD_US  # GPU-side wait after each L2 flush before a timed call (rows record it)
    l2: str = L2_COLD  # L2 before each timed call: flushed, or flushed and dout written (rows record it)
    progress: bool = True  # a progress bar per study on stderr
    replay_delay_s: float = 0.0  # a replay answers each trial after this long (as a GPU takes)
    heartbeat_s: float = HEARTBEAT_S  # a running trial's sign of life; dead after 4 of them
    bundled: bool = True  # answer from the bundled results too (a replay never does)
    warm_start: int = WARM_START_SIZE  # nearest tuned shapes' winners queued first (0: none)
    ahead: int = AHEAD  # trials asked at once, compiled together (a replay: one at a time)
    families: tuple[str, ...] = ()  # search only these (default: every family the GPU runs)
    op: str = DEFAULT_OP  # the kernel tuned (variants.OPS)
    remeasure: int = 0  # no study: measure again this many stored leaders per group (tuner.run.leaders)


@dataclass
class TuneResult:
    gpu: str  # the label rows are filed under
    device_name: str  # as the runner's device reports it
    seed: int
    run_id: str
    outcomes: list[StudyOutcome] = field(default_factory=list)  # the studies that finished
    interrupted: bool = False
    missing: int = 0  # configurations proposed that the replayed recording lacks
    rows: int = 0  # rows written by this run
    files: list[Path] = field(default_factory=list)  # where
    l2: str = L2_COLD  # the L2 state the runner timed in

    def frame(self) -> pd.DataFrame:
        return outcome_frame(self.outcomes)


def study_plans(
    request: TuneRequest, gpu: str, seed: int, hold_us: float | None = None, l2: str | None = None
) -> list[StudyPlan]:
    """One plan per shape and dtype of the request, in that order; `hold_us` and `l2` are how
    the runner times (part of the default study name)."""
    single = len(request.shapes) * len(request.dtypes) == 1
    return [
        StudyPlan(
            gpu=gpu,
            shape=shape,
            dtype=DTYPES[d],
            study_name=(
                request.study
                if request.study and single
                else default_study_name(
                    gpu, shape, DTYPES[d], request.study, request.families, hold_us, l2, request.op
                )
            ),
            sampler=request.sampler,
            seed=seed,
            trials=None if request.sampler == "grid" else request.trials,
            timeout_s=request.timeout_s,
            ahead=1 if request.replay_dir is not None else request.ahead,
        )
        for shape in request.shapes
        for d in request.dtypes
    ]


def outcome_frame(outcomes: list[StudyOutcome]) -> pd.DataFrame:
    """Every row the outcomes know (measured, or answered from the store or the study)."""
    rows = [row for o in outcomes for row in o.rows.values()]
    if not rows:
        return pd.DataFrame(columns=[*SHAPE_COLUMNS, "gpu", "dtype"])
    return pd.DataFrame(rows)


def check_numbers(request: TuneRequest) -> None:
    """The request's numbers that would fail late or run wrong (a timeout of 0 measures nothing)."""
    if request.remeasure < 0:
        raise TuneError(f"--remeasure takes a whole number of leaders from 1, not {request.remeasure}")
    if request.trials < 1:
        raise TuneError("--trials must be at least 1")
    if request.seed is not None and not 0 <= request.seed <= SEED_MAX:
        raise TuneError(f"--seed takes a whole number from 0 to {SEED_MAX}, not {request.seed}")
    if request.timeout_s is not None and not request.timeout_s > 0:
        raise TuneError(
            f"--timeout takes seconds above 0 (leave it out for no limit), not {request.timeout_s}"
        )
    if not request.trial_timeout_s > 0:
        raise TuneError(f"--trial-timeout takes seconds above 0, not {request.trial_timeout_s}")
    if not 0 <= request.hold_us < 1e6:
        raise TuneError(f"--hold-us takes microseconds from 0, not {request.hold_us}")
    if request.l2 not in L2_STATES:
        raise TuneError(f"--l2 takes one of {', '.join(L2_STATES)}, not {request.l2!r}")
