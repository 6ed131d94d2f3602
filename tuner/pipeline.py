"""The tuning pipeline: what `python -m tuner tune` does, callable without a command line.

    request = TuneRequest(shapes=(Shape.parse("B=8,T=1024,NH=32,NH_KV=8,HD=128"),), dtypes=("bf16",),
                          replay_dir=Path("results/data"), gpu="h200", storage="memory")
    result = tune(request)              # or tune(request, runner) with a runner of your own
    result.frame()                      # every row the studies know

`tune` picks the runner (the one given, else a replay of `replay_dir`, else the GPU's), the
GPU label, the Optuna storage and the results sink; runs one study per shape and dtype in
turn (`run_plans`) and returns what happened. It closes the runner. A request that cannot
run raises TuneError, whose message says what to do (in terms of the command line's flags,
which the request's fields mirror). A stop request (`stop`, which the command line sets on
Ctrl-C) ends the run after the current trial, or cuts the trial short without a row: the
result says `interrupted`, holds what was measured, and the same request run again resumes.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from optuna.storages import BaseStorage

from results.schema import DEFAULT_HOLD_US, L2_COLD, L2_STATES, SHAPE_COLUMNS, rows_of_op
from results.store import clean_stale_temporaries, load_results, read_dirs, user_results_dir
from tuner.arguments import SEED_MAX
from tuner.ask_ahead import AHEAD
from tuner.claims import stored_answers
from tuner.gpus import GpuLabelMismatch, InvalidGpuLabel, resolve_label
from tuner.interrupt import StopFlag
from tuner.preflight import CUDA_HINT, PreflightError, check_cuda, check_results_dir, check_storage
from tuner.presets import DEFAULT_SHAPES, DEFAULT_TRIALS
from tuner.replay import NoRecording, ReplayRunner
from tuner.report import ProgressBars
from tuner.rows import ResultsSink, new_run_id
from tuner.runner import Runner
from tuner.samplers import UnavailableSampler, make_sampler
from tuner.storage import InvalidStorage, default_storage_url, make_storage
from tuner.store_watch import StoreWatch
from tuner.study import HEARTBEAT_S, StudyLoop
from tuner.study_plan import ProgressHook, StudyOutcome, StudyPlan, default_study_name
from tuner.warm_start import WARM_START_SIZE, index_of, with_warm_start
from variants import DEFAULT_OP, DTYPES, Family, Shape, UnknownOp, compute_capability_number, get_op
from variants.errors import RepkvTuneError

log = logging.getLogger(__name__)


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


def run_plans(
    plans: list[StudyPlan],
    runner: Runner,
    storage: BaseStorage | str | None,
    *,
    run_id: str,
    sink: ResultsSink | None = None,
    stored: pd.DataFrame | None = None,
    families: Mapping[str, Family] | None = None,
    progress_factory: Callable[[StudyPlan], ProgressHook | None] | None = None,
    on_done: Callable[[StudyOutcome], None] | None = None,
    stop: StopFlag | None = None,
    heartbeat_s: float = HEARTBEAT_S,
    warm_start: int = 0,
) -> list[StudyOutcome]:
    """Every plan in turn, one study each; rows are flushed after each trial and at the end.
    A stop request ends the run after the study it lands in (whose outcome is kept). With
    `warm_start`, a study first measures that many winners of the nearest shapes tuned
    before it (the stored rows and this run's)."""
    outcomes = []
    stored_index = index_of(stored) if warm_start else None  # once: ~0.5 s for the bundled store
    stop = stop if stop is not None else runner.stop
    try:
        for plan in plans:
            if stop:
                break
            hold, l2 = runner.identity.hold_us, runner.identity.l2
            if warm_start:
                indexes = [stored_index, index_of(outcome_frame(outcomes))]
                plan = with_warm_start(plan, indexes, warm_start, hold, l2)
            known = (
                stored_answers(stored, plan.gpu, plan.shape, plan.dtype, families, hold, l2)
                if stored is not None
                else None
            )
            progress = progress_factory(plan) if progress_factory else None
            started = time.monotonic()
            loop = StudyLoop(
                plan,
                runner,
                storage,
                run_id=run_id,
                sink=sink,
                known=known,
                families=families,
                progress=progress,
                stop=stop,
                watch=(
                    StoreWatch(
                        sink.root,
                        plan.gpu,
                        plan.shape,
                        plan.dtype,
                        families,
                        own=lambda: sink.files,
                        hold_us=hold,
                        l2=l2,
                    )
                    if sink is not None
                    else None
                ),
                heartbeat_s=heartbeat_s,
                grace_s=4 * heartbeat_s,
            )
            outcome = loop.run()
            log.info(
                "%s: %d measured in %.1f s",
                plan.study_name,
                len(outcome.measured),
                time.monotonic() - started,
            )
            outcomes.append(outcome)
            if on_done is not None:
                on_done(outcome)
    finally:
        if sink is not None:
            sink.close()
    return outcomes


def outcome_frame(outcomes: list[StudyOutcome]) -> pd.DataFrame:
    """Every row the outcomes know (measured, or answered from the store or the study)."""
    rows = [row for o in outcomes for row in o.rows.values()]
    if not rows:
        return pd.DataFrame(columns=[*SHAPE_COLUMNS, "gpu", "dtype"])
    return pd.DataFrame(rows)


def gpu_runner(
    device: int = 0,
    timeout_s: float = 10.0,
    hold_us: float = DEFAULT_HOLD_US,
    l2: str = L2_COLD,
    families: Mapping[str, Family] | None = None,
) -> Runner:
    """The GPU's runner (CuPy, imported only now): CuPy and the driver are probed here first,
    and a worker that dies while starting is a TuneError saying why, not a traceback."""
    try:
        check_cuda(device)
        from tuner.gpu.runner import GpuBusy, GpuRunner, WorkerFailed
    except PreflightError as exc:
        raise TuneError(str(exc)) from None
    except ImportError as exc:
        raise TuneError(f"no GPU runner here ({exc}): {CUDA_HINT}") from None
    try:
        return GpuRunner(device=device, timeout_s=timeout_s, hold_us=hold_us, l2=l2, families=families)
    except GpuBusy as exc:
        raise TuneError(f"GPU {device}: {exc}") from None
    except (WorkerFailed, ConnectionError, TimeoutError) as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        raise TuneError(
            f"the GPU worker did not start ({lines[-1] if lines else type(exc).__name__}); "
            f"without a driver or CuPy: {CUDA_HINT}"
        ) from None


def check_numbers(request: TuneRequest) -> None:
    """The request's numbers that would fail late or run wrong (a timeout of 0 measures nothing)."""
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


def preflight(request: TuneRequest, replaying: bool) -> None:
    """What can be checked before a worker starts and anything is measured: the results
    directory (a file written and removed there) and the storage (its file, or one
    connection to its server)."""
    results_dir = request.results_dir
    named = "--results"
    if results_dir is None and not replaying:
        results_dir, named = user_results_dir(), "the results directory (--results, $REPKV_RESULTS_DIR)"
    try:
        if results_dir is not None:
            check_results_dir(results_dir, named)
        check_storage(request.storage)
    except PreflightError as exc:
        raise TuneError(str(exc)) from None


def searched_families(request: TuneRequest, runner: Runner) -> dict[str, Family] | None:
    """The families searched: those `--family` names of the op, else every family of the op
    that the runner runs (None: repkv backward's, as the runner knows them). On a GPU, one its
    device is too old for is a TuneError before anything is measured."""
    op = get_op(request.op)
    if not request.families:
        if op.name == DEFAULT_OP:
            return None
        return {n: f for n, f in op.families.items() if runs_on_device(f, runner)}
    if request.replay_dir is None:
        too_new = [f for f in request.families if not runs_on_device(op.families[f], runner)]
        if too_new:
            runner.close()
            need = op.families[too_new[0]].min_compute_capability
            raise TuneError(
                f"family {too_new[0]} needs compute capability {need // 10}.{need % 10}; "
                f"{runner.identity.name} has {runner.identity.compute_capability}"
            )
    return {name: op.families[name] for name in request.families}


def runs_on_device(family: Family, runner: Runner) -> bool:
    number = compute_capability_number(runner.identity.compute_capability)
    return number is None or family.min_compute_capability <= number


def tune(
    request: TuneRequest,
    runner: Runner | None = None,
    *,
    echo: Callable[[str], None] | None = None,
    stop: StopFlag | None = None,
) -> TuneResult:
    """Run the request's studies (see the module's notes). `runner` replaces the replay or
    GPU runner; `echo` receives a line saying what is about to run; `stop` is looked at
    between trials (and by the runner while it waits)."""
    unknown = [d for d in request.dtypes if d not in DTYPES]
    if unknown:
        raise TuneError(f"unknown dtype {unknown[0]!r}: use --dtype with {', '.join(DTYPES)}")
    check_numbers(request)
    seed = request.seed if request.seed is not None else secrets.randbelow(2**31)
    try:
        make_sampler(request.sampler, seed)
    except UnavailableSampler as exc:
        raise TuneError(str(exc)) from None

    try:
        op = get_op(request.op)
    except UnknownOp as exc:
        raise TuneError(str(exc)) from None
    unknown_families = [f for f in request.families if f not in op.families]
    if unknown_families:
        raise TuneError(
            f"unknown family {unknown_families[0]!r} of {op.name}: use --family with {', '.join(op.families)}"
        )
    preflight(request, replaying=runner is None and request.replay_dir is not None)
    if runner is None and request.replay_dir is not None:
        try:
            runner = ReplayRunner.from_directory(
                request.replay_dir, request.gpu, delay_s=request.replay_delay_s, l2=request.l2
            )
        except NoRecording as exc:
            raise TuneError(f"{exc} (in {request.replay_dir})") from None
        gpu = runner.gpu
        results_dir = request.results_dir  # replays write only where asked to
    else:
        families_run = None if op.name == DEFAULT_OP else op.families
        runner = runner or gpu_runner(
            request.device, request.trial_timeout_s, request.hold_us, request.l2, families_run
        )
        try:
            gpu = resolve_label(request.gpu, runner.identity.name, force=request.force_gpu_label)
        except (GpuLabelMismatch, InvalidGpuLabel) as exc:
            runner.close()
            raise TuneError(str(exc)) from None
        results_dir = request.results_dir if request.results_dir is not None else user_results_dir()

    families = searched_families(request, runner)
    stop = stop if stop is not None else StopFlag()
    runner.stop = stop
    stop.on_abort(runner.abort)
    if results_dir is not None:
        clean_stale_temporaries(results_dir)
    storage_url = request.storage or (default_storage_url(results_dir) if results_dir else None)
    try:
        storage = make_storage(storage_url, heartbeat_interval=request.heartbeat_s)
    except InvalidStorage as exc:
        runner.close()
        raise TuneError(str(exc)) from None

    result = TuneResult(
        gpu=gpu,
        device_name=runner.identity.name,
        seed=seed,
        run_id=new_run_id(),
        l2=runner.identity.l2 or L2_COLD,
    )
    sink = ResultsSink(results_dir, gpu, result.run_id) if results_dir else None
    # what is already measured: the results directory, and the bundled results unless replaying
    bundled = request.replay_dir is None and request.bundled
    stored = load_results(read_dirs(results_dir, bundled=bundled))[0] if results_dir else None
    stored = rows_of_op(stored, op.name) if stored is not None else None
    plans = study_plans(request, gpu, seed, runner.identity.hold_us, runner.identity.l2)
    if echo is not None:
        echo(
            f"tuning {gpu} ({result.device_name}): {len(request.shapes)} shapes x {len(request.dtypes)} "
            f"dtypes, sampler {request.sampler} seed {seed}, run {result.run_id}"
        )
    bars = ProgressBars(enabled=request.progress)
    try:
        run_plans(
            plans,
            runner,
            storage,
            run_id=result.run_id,
            sink=sink,
            stored=stored,
            families=families,
            progress_factory=bars,
            on_done=lambda o: (bars.close(), result.outcomes.append(o)),
            stop=stop,
            heartbeat_s=request.heartbeat_s,
            warm_start=request.warm_start,
        )
    except KeyboardInterrupt:  # only where no handler turned Ctrl-C into the stop flag
        result.interrupted = True
    except NoRecording as exc:
        raise TuneError(f"{exc}: replay only the shapes and dtypes the recording holds") from None
    finally:
        bars.close()
        runner.close()
    result.interrupted = result.interrupted or bool(stop) or any(o.interrupted for o in result.outcomes)
    result.missing = sum(runner.missing.values())
    if sink is not None:
        result.rows, result.files = len(sink.rows), list(sink.files)
    return result
