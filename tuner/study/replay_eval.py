"""How many trials a sampler needs: replayed against exhaustive recordings.

For each recorded (shape, dtype) and each seed, a fresh in-memory study runs through the
ReplayRunner until its best configuration is within `tolerance` of the recording's optimum
(or `max_trials` configurations were measured). A trial here is a configuration measured:
repeats and invalid combinations cost nothing on a GPU and are not counted.

A sampler named `<sampler>+warm` starts from the winners of the nearest recorded shapes
(`tuner.study.warm_start`), with the evaluated shape held out in every dtype: the recording then
plays a store that never saw the shape.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import multiprocessing
import statistics
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import optuna
import pandas as pd

from results.index import StoreIndex, TunedGroup, build_index
from results.schema import Status
from results.store import load_results
from tuner.cli.defaults import DEFAULT_SAMPLERS
from tuner.interrupt import held_back, leave_it_to_the_parent
from tuner.runners.replay import ReplayRunner
from tuner.study.loop import StudyLoop
from tuner.study.plan import StudyPlan
from tuner.study.warm_start import shape_held_out, warm_start_configs
from variants import DTYPES, FAMILIES, Config, Family, Shape, valid_configs

MIN_SPACE = 100  # configurations a recorded group's complete families must span to be evaluated
WARM = "+warm"


@dataclass(frozen=True)
class EvalResult:
    sampler: str
    shape: Shape
    dtype: str
    seed: int
    trials: float  # configurations measured to reach the tolerance; inf if never


def trials_to_target(measured: list[tuple[str, float]], target: float) -> float:
    for n, (_, value) in enumerate(measured, start=1):
        if value <= target:
            return n
    return math.inf


def complete_families(runner: ReplayRunner, shape: Shape, dtype: str) -> dict[str, Family]:
    """The families whose every valid configuration the recording holds for (shape, dtype):
    an exhaustive grid's, not those a later tuning run sampled there (a `--family tile` run
    on a recorded shape adds 40 of tile's configurations, not all of them)."""
    recorded = runner.recorded(shape, DTYPES[dtype])
    return {
        name: family
        for name, family in runner.runnable_families(shape, DTYPES[dtype]).items()
        if all(c.key in recorded for c in valid_configs(shape, DTYPES[dtype], {name: family}))
    }


def optimum(runner: ReplayRunner, shape: Shape, dtype: str, families: Mapping[str, Family]) -> float:
    """The recording's best objective value over `families`: time over copy of the fastest
    ok configuration of theirs."""
    answers = runner.recorded(shape, DTYPES[dtype])
    best = min(
        (
            m.time_ms
            for key, m in answers.items()
            if m.status == Status.OK and key.partition("[")[0] in families
        ),
        default=math.inf,
    )
    return best / runner.copy_time(shape, DTYPES[dtype])


def of_families(groups: Iterable[TunedGroup], families: Mapping[str, Family]) -> list[TunedGroup]:
    """The tuned groups with only the candidates of `families`, in their order (those left
    with none dropped): the warm start a search of those families would get from a store
    that held nothing else. Without it a grid of some families, judged beside a store whose
    winners are of another family, would be warm-started with nothing it can search."""
    kept = []
    for group in groups:
        candidates = tuple(c for c in group.candidates if c.family.name in families)
        if candidates:
            kept.append(dataclasses.replace(group, candidates=candidates))
    return kept


@dataclass(frozen=True)
class Group:
    """One exhaustively recorded (shape, dtype), made ready once for all its runs: the
    families searched (those recorded completely there), the time over copy that counts as
    found, and the warm start a `+warm` sampler queues (empty without an index)."""

    shape: Shape
    dtype: str
    families: tuple[str, ...]
    target: float
    warm: tuple[Config, ...] = ()


def prepare(
    runner: ReplayRunner,
    shape: Shape,
    dtype: str,
    tolerance: float,
    index: StoreIndex | None = None,
    families: Mapping[str, Family] | None = None,
) -> Group:
    """What every run of (shape, dtype) shares; `index` (the recording's) gives the warm start,
    with the evaluated shape held out in every dtype."""
    families = complete_families(runner, shape, dtype) if families is None else families
    warm: list[Config] = []
    if index is not None:
        held_out = shape_held_out(index, runner.gpu, shape)
        groups = of_families(index.groups_of(runner.gpu), families)
        warm = warm_start_configs(groups, shape, DTYPES[dtype], exclude=held_out)
    target = optimum(runner, shape, dtype, families) * (1.0 + tolerance)
    return Group(shape, dtype, tuple(families), target, tuple(warm))


def run_one(
    runner: ReplayRunner, group: Group, sampler: str, seed: int, max_trials: int, ahead: int = 1
) -> EvalResult:
    """One search of `group` by `sampler` (a `+warm` one queues the group's warm start first),
    asking `ahead` trials at once as `tune --ahead` does on a GPU, until the target or
    `max_trials` configurations measured."""
    plan = StudyPlan(
        gpu=runner.gpu,
        shape=group.shape,
        dtype=DTYPES[group.dtype],
        study_name=f"eval-{sampler}-{seed}",
        sampler=sampler.removesuffix(WARM),
        seed=seed,
        trials=max_trials,
        target_value=group.target,
        warm_start=group.warm if sampler.endswith(WARM) else (),
        ahead=ahead,
    )
    families = {name: FAMILIES[name] for name in group.families}
    outcome = StudyLoop(plan, runner, None, families=families).run()
    return EvalResult(
        sampler, group.shape, group.dtype, seed, trials_to_target(outcome.measured, group.target)
    )


def evaluate_one(
    runner: ReplayRunner,
    sampler: str,
    shape: Shape,
    dtype: str,
    seed: int,
    tolerance: float,
    max_trials: int,
    index: StoreIndex | None = None,
    ahead: int = 1,
) -> EvalResult:
    """One run, its group made ready for it alone (`evaluate` does that once per group)."""
    group = prepare(runner, shape, dtype, tolerance, index if sampler.endswith(WARM) else None)
    return run_one(runner, group, sampler, seed, max_trials, ahead)


def complete_groups(runner: ReplayRunner) -> list[tuple[Shape, str, dict[str, Family]]]:
    """`exhaustive_groups`, each with its completely recorded families."""
    found = []
    for shape, dtype in runner.groups():
        families = complete_families(runner, shape, dtype)
        if len(valid_configs(shape, DTYPES[dtype], families)) >= MIN_SPACE:
            found.append((shape, dtype, families))
    return found


def exhaustive_groups(runner: ReplayRunner) -> list[tuple[Shape, str]]:
    """The recorded (shape, dtype) groups whose completely recorded families
    (`complete_families`) make a space of at least MIN_SPACE configurations: only over those is
    the recorded optimum the true one, and a smaller space (llm.c's six block sizes, which
    every study measures) is no test of a sampler. Groups a tuning run only sampled are left
    out."""
    return [(shape, dtype) for shape, dtype, _ in complete_groups(runner)]


Run = tuple[str, int, int]  # sampler, group (its place in the list), seed
_WORKER: tuple[ReplayRunner, list[Group], int, int] | None = None  # what a process runs with


def _start_worker(runner: ReplayRunner, groups: list[Group], max_trials: int, ahead: int) -> None:
    global _WORKER
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    _WORKER = (runner, groups, max_trials, ahead)


def _start_process(runner: ReplayRunner, groups: list[Group], max_trials: int, ahead: int) -> None:
    leave_it_to_the_parent()
    _start_worker(runner, groups, max_trials, ahead)


def _run_batch(batch: list[Run]) -> list[EvalResult]:
    assert _WORKER is not None, "a process runs only after _start_worker"
    runner, groups, max_trials, ahead = _WORKER
    return [run_one(runner, groups[g], sampler, seed, max_trials, ahead) for sampler, g, seed in batch]


def batches(runs: list[Run], jobs: int) -> list[list[Run]]:
    """The runs in order, cut into about four batches per process (consecutive seeds of one
    group, mostly): few enough that a batch costs no more than its runs, enough that the
    processes finish together."""
    size = max(1, math.ceil(len(runs) / (4 * jobs)))
    return [runs[i : i + size] for i in range(0, len(runs), size)]


def evaluate(
    frame: pd.DataFrame,
    gpu: str | None = None,
    samplers: Iterable[str] = DEFAULT_SAMPLERS,
    seeds: int = 20,
    tolerance: float = 0.02,
    max_trials: int = 200,
    jobs: int = 1,
    on_done: Callable[[int, int], None] | None = None,
    ahead: int = 1,
) -> list[EvalResult]:
    """Every sampler x exhaustive group x seed, in that order. The recording is indexed once
    and each group made ready once (`prepare`); with `jobs` > 1 the runs go in batches to
    that many processes, each handed the indexed recording once. `on_done(done, total)` is
    called before the first run (done 0) and as runs finish."""
    runner = ReplayRunner(frame, gpu)
    samplers = list(samplers)
    found = complete_groups(runner)
    groups = [prepare(runner, shape, dtype, tolerance, None, families) for shape, dtype, families in found]
    if any(s.endswith(WARM) for s in samplers):
        index = build_index(frame[frame["gpu"] == runner.gpu])
        groups += [
            prepare(runner, shape, dtype, tolerance, index, families) for shape, dtype, families in found
        ]
    runs = [
        (sampler, g + (len(found) if sampler.endswith(WARM) else 0), seed)
        for sampler in samplers
        for g in range(len(found))
        for seed in range(seeds)
    ]
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    if on_done is not None:
        on_done(0, len(runs))
    jobs = max(1, min(jobs, len(runs)))
    if jobs == 1:
        _start_worker(runner, groups, max_trials, ahead)
        results = []
        for run in runs:
            results += _run_batch([run])
            if on_done is not None:
                on_done(len(results), len(runs))
        return results
    done: dict[int, list[EvalResult]] = {}
    with ProcessPoolExecutor(
        jobs,
        # forked: a worker has the indexed recording at once, and no resource tracker (which a
        # spawned pool needs) complains of leaked semaphores when a Ctrl-C quits the parent at once
        mp_context=multiprocessing.get_context("fork"),
        initializer=_start_process,
        initargs=(runner, groups, max_trials, ahead),
    ) as pool:
        with held_back():  # the workers start (on the first submits) with Ctrl-C held back
            futures = {pool.submit(_run_batch, batch): i for i, batch in enumerate(batches(runs, jobs))}
        for future in as_completed(futures):
            done[futures[future]] = future.result()
            if on_done is not None:
                on_done(sum(map(len, done.values())), len(runs))
    return [result for i in sorted(done) for result in done[i]]


def summary(results: list[EvalResult]) -> pd.DataFrame:
    """Per sampler and (shape, dtype): median, p80 and worst trials to the target."""
    records = []
    for r in results:
        records.append({"sampler": r.sampler, "shape": r.shape.key, "dtype": r.dtype, "trials": r.trials})
    frame = pd.DataFrame(records)
    if frame.empty:
        return frame
    grouped = frame.groupby(["sampler", "shape", "dtype"], sort=True)["trials"]
    return grouped.agg(
        median="median",
        p80=lambda s: s.quantile(0.8, interpolation="higher"),
        worst="max",
        seeds="count",
    ).reset_index()


def overall_medians(results: list[EvalResult]) -> dict[str, float]:
    """Per sampler: the median over seeds of each group, then the median over groups."""
    table = summary(results)
    return (
        {s: float(statistics.median(g["median"])) for s, g in table.groupby("sampler")} if len(table) else {}
    )


def load(directory: Path) -> pd.DataFrame:
    frame, _ = load_results(Path(directory))
    return frame


logging.getLogger(__name__).addHandler(logging.NullHandler())
