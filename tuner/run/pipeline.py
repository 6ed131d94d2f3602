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

import dataclasses
import logging
import secrets
import time
from collections.abc import Callable, Mapping

import pandas as pd
from optuna.storages import BaseStorage

from results.schema import L2_COLD, rows_of_op
from results.store import clean_stale_temporaries, load_results, read_dirs, user_results_dir
from tuner.cli.report import ProgressBars
from tuner.interrupt import StopFlag
from tuner.run.gpus import GpuLabelMismatch, InvalidGpuLabel, resolve_label
from tuner.run.leaders import LEADERS_AGAIN, leaders_of_other_runs, leaders_plan
from tuner.run.preflight import PreflightError, check_results_dir
from tuner.run.request import TuneError, TuneRequest, TuneResult, check_numbers, outcome_frame, study_plans
from tuner.run.rows import ResultsSink, new_run_id
from tuner.run.setup import check_families_serve, gpu_runner, preflight, searched_families
from tuner.runners.replay import NoRecording, ReplayRunner
from tuner.runners.runner import Runner
from tuner.study.claims import stored_answers
from tuner.study.loop import HEARTBEAT_S, StudyLoop
from tuner.study.plan import ProgressHook, StudyOutcome, StudyPlan
from tuner.study.samplers import UnavailableSampler, make_sampler
from tuner.study.storage import InvalidStorage, default_storage_url, make_storage
from tuner.study.store_watch import StoreWatch
from tuner.study.warm_start import index_of, with_warm_start
from variants import DEFAULT_OP, DTYPES, Config, Family, UnknownOp, get_op

log = logging.getLogger(__name__)


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
    op: str = DEFAULT_OP,
    leaders_again: int = 0,
    remeasure: int = 0,
) -> list[StudyOutcome]:
    """Every plan in turn, one study each; rows are flushed after each trial and at the end.
    A stop request ends the run after the study it lands in (whose outcome is kept). With
    `warm_start`, a study first measures that many winners of the nearest shapes tuned
    before it (the stored rows and this run's). With `leaders_again`, a study that measured
    something is followed by one that measures again that many of the group's leaders of other
    studies (`tuner.run.leaders`), counted in the outcome's `again`. With `remeasure`, a plan
    runs no study of its own: that many of its group's stored leaders are measured again
    together (`remeasure_leaders`)."""
    outcomes = []
    stored_index = index_of(stored) if warm_start else None  # once: ~0.5 s for the bundled store
    op_families = get_op(op).families
    stop = stop if stop is not None else runner.stop
    try:
        for plan in plans:
            if stop:
                break
            hold, l2 = runner.identity.hold_us, runner.identity.l2
            if remeasure:
                again = remeasure_leaders(
                    plan, stored, runner, storage, run_id, sink, op, remeasure, stop, heartbeat_s
                )
                if again is not None:
                    outcomes.append(again)
                    if on_done is not None:
                        on_done(again)
                continue
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
            if leaders_again and outcome.measured and not stop:
                # from any family of the op: a leader may be of a family this run did not search
                measured = {key for key, _ in outcome.measured}
                again = leaders_of_other_runs(
                    stored, plan, op, run_id, measured, op_families, leaders_again, l2 or L2_COLD
                )
                _measure_again(outcome, again, runner, storage, run_id, sink, op_families, stop, heartbeat_s)
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


def _measure_again(
    outcome: StudyOutcome,
    configs: list[Config],
    runner: Runner,
    storage: BaseStorage | str | None,
    run_id: str,
    sink: ResultsSink | None,
    families: Mapping[str, Family] | None,
    stop: StopFlag,
    heartbeat_s: float,
) -> None:
    """The follow-up study of `outcome`'s plan over `configs` (the group's leaders of other
    studies); its rows join the outcome's and `again` counts them."""
    if not configs:
        return
    follow = StudyLoop(
        leaders_plan(outcome.plan, configs, run_id),
        runner,
        storage,
        run_id=run_id,
        sink=sink,
        families=families,
        stop=stop,
        heartbeat_s=heartbeat_s,
        grace_s=4 * heartbeat_s,
    ).run()
    outcome.rows.update(follow.rows)
    outcome.again += len(follow.measured)
    outcome.interrupted = outcome.interrupted or follow.interrupted


def remeasure_leaders(
    plan: StudyPlan,
    stored: pd.DataFrame | None,
    runner: Runner,
    storage: BaseStorage | str | None,
    run_id: str,
    sink: ResultsSink | None,
    op: str,
    count: int,
    stop: StopFlag,
    heartbeat_s: float,
) -> StudyOutcome | None:
    """Measure again, in one process and with this run's id, the `count` leaders the store holds
    for the plan's group (`leaders_of_other_runs` over every stored study: the fastest
    configuration of each of the `count` fastest families). `results.best.ranked` then ranks
    them by these times, their newest. None where the store holds nothing for the group."""
    probe = dataclasses.replace(plan, study_name=f"{plan.study_name}/remeasure")  # every stored study counts
    families = get_op(op).families
    configs = leaders_of_other_runs(
        stored, probe, op, run_id, (), families, count, runner.identity.l2 or L2_COLD
    )
    if not configs:
        log.warning("%s: nothing stored for this group to measure again", plan.study_name)
        return None
    outcome = StudyLoop(
        leaders_plan(probe, configs, run_id),
        runner,
        storage,
        run_id=run_id,
        sink=sink,
        families=families,
        stop=stop,
        heartbeat_s=heartbeat_s,
        grace_s=4 * heartbeat_s,
    ).run()
    outcome.again = len(outcome.measured)
    return outcome


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
    for shape in request.shapes:
        refused = op.rejection(shape)
        if refused is not None:
            raise TuneError(f"{op.name} cannot run {shape.key}: {refused[1]}")
    if request.families:
        check_families_serve(op, request)
    preflight(request, replaying=runner is None and request.replay_dir is not None)
    if runner is None and request.replay_dir is not None:
        try:
            runner = ReplayRunner.from_directory(
                request.replay_dir, request.gpu, delay_s=request.replay_delay_s, l2=request.l2, op=op.name
            )
        except NoRecording as exc:  # it names the recording
            raise TuneError(str(exc)) from None
        try:  # every shape and dtype asked for, before the first is replayed and written
            for shape in request.shapes:
                for dtype in request.dtypes:
                    runner.copy_time(shape, DTYPES[dtype])
        except NoRecording as exc:
            raise TuneError(f"{exc}: replay only the shapes and dtypes the recording holds") from None
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
        try:  # where the rows go, <results>/<gpu>: the preflight could not name it yet
            check_results_dir(results_dir / gpu, "--results")
        except PreflightError as exc:
            runner.close()
            raise TuneError(str(exc)) from None
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
            op=op.name,
            leaders_again=LEADERS_AGAIN,
            remeasure=request.remeasure,
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
