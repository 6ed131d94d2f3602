"""How many trials a sampler needs: replayed against exhaustive recordings.

For each recorded (shape, dtype) and each seed, a fresh in-memory study runs through the
ReplayRunner until its best configuration is within `tolerance` of the recording's optimum
(or `max_trials` configurations were measured). A trial here is a configuration measured:
repeats and invalid combinations cost nothing on a GPU and are not counted.

A sampler named `<sampler>+warm` starts from the winners of the nearest recorded shapes
(`tuner.warm_start`), with the evaluated shape held out in every dtype: the recording then
plays a store that never saw the shape.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import statistics
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import optuna
import pandas as pd

from results.index import StoreIndex, TunedGroup, build_index
from results.schema import Status
from results.store import load_results
from tuner.replay import ReplayRunner
from tuner.study import StudyLoop
from tuner.study_plan import StudyPlan
from tuner.warm_start import shape_held_out, warm_start_configs
from variants import DTYPES, Family, Shape, valid_configs

DEFAULT_SAMPLERS = ("tpe", "random", "tpe+warm")
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
    """One run; `index` (the recording's) gives a `+warm` sampler its warm start; `ahead`
    trials are asked at once, as `tune --ahead` does on a GPU. The search covers the families
    the recording holds completely there (`complete_families`), and so does the optimum."""
    families = complete_families(runner, shape, dtype)
    target = optimum(runner, shape, dtype, families) * (1.0 + tolerance)
    base = sampler.removesuffix(WARM)
    warm: list = []
    if sampler.endswith(WARM) and index is not None:
        held_out = shape_held_out(index, runner.gpu, shape)
        groups = of_families(index.groups_of(runner.gpu), families)
        warm = warm_start_configs(groups, shape, DTYPES[dtype], exclude=held_out)
    plan = StudyPlan(
        gpu=runner.gpu,
        shape=shape,
        dtype=DTYPES[dtype],
        study_name=f"eval-{sampler}-{seed}",
        sampler=base,
        seed=seed,
        trials=max_trials,
        target_value=target,
        warm_start=tuple(warm),
        ahead=ahead,
    )
    outcome = StudyLoop(plan, runner, None, families=families).run()
    return EvalResult(sampler, shape, dtype, seed, trials_to_target(outcome.measured, target))


Task = tuple[pd.DataFrame, str, str, Shape, str, tuple[int, ...], float, int, int]


def _group_results(args: Task) -> Iterator[EvalResult]:
    frame, gpu, sampler, shape, dtype, seeds, tolerance, max_trials, ahead = args
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    runner = ReplayRunner(frame, gpu)
    index = build_index(frame) if sampler.endswith(WARM) else None
    for s in seeds:
        yield evaluate_one(runner, sampler, shape, dtype, s, tolerance, max_trials, index, ahead)


def _evaluate_group(args: Task) -> list[EvalResult]:
    return list(_group_results(args))


def exhaustive_groups(runner: ReplayRunner) -> list[tuple[Shape, str]]:
    """The recorded (shape, dtype) groups whose completely recorded families
    (`complete_families`) make a space of at least MIN_SPACE configurations: only over those is
    the recorded optimum the true one, and a smaller space (llm.c's six block sizes, which
    every study measures) is no test of a sampler. Groups a tuning run only sampled are left
    out."""
    found = []
    for shape, dtype in runner.groups():
        families = complete_families(runner, shape, dtype)
        if len(valid_configs(shape, DTYPES[dtype], families)) >= MIN_SPACE:
            found.append((shape, dtype))
    return found


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
    """Every sampler x exhaustive group x seed. `on_done(done, total)` is called as runs of
    one seed finish (with `jobs` > 1: as a group's seeds all finish)."""
    runner = ReplayRunner(frame, gpu)
    frame = frame[frame["gpu"] == runner.gpu]
    tasks = [
        (frame, runner.gpu, sampler, shape, dtype, tuple(range(seeds)), tolerance, max_trials, ahead)
        for sampler in samplers
        for shape, dtype in exhaustive_groups(runner)
    ]
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    total, results = len(tasks) * seeds, []

    def done(batch: list[EvalResult]) -> None:
        results.extend(batch)
        if on_done is not None:
            on_done(len(results), total)

    if jobs <= 1:
        for task in tasks:
            for result in _group_results(task):
                done([result])
        return results
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for batch in pool.map(_evaluate_group, tasks):
            done(batch)
    return results


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
