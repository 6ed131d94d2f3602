"""Asking several trials at once, so that their kernels compile together while none is timed.

A trial's time on the GPU is mostly its kernel's compile when the compile cache is cold. The
study loop asks `StudyPlan.ahead` trials in a row (TPE's constant liar treats the running ones
as bad, so they differ), claims each one's configuration at once (the sampler's
`UnseenFirst` then keeps the next off it); the runner compiles
them in parallel threads (`Runner.prepare`), and the trials are then measured one after the
other, each through the usual admission (`tuner.study.claims.admit`): one that the budget no longer
has a place for when its turn comes is pruned as over budget, having cost a compile only.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import optuna
from optuna.trial import Trial, TrialState

from tuner.cli.defaults import AHEAD as AHEAD  # the command line's default, read from here too
from tuner.interrupt import StopFlag, TrialInterrupted
from tuner.runners.runner import Runner
from tuner.study.claims import INTERRUPTED, claim, mark
from tuner.study.space import SearchSpace
from variants import Config


def ask_ahead(
    study: optuna.Study, space: SearchSpace, n: int, on_ask: Callable[[Trial], None] | None = None
) -> list[tuple[Trial, Config | None]]:
    """`n` (at least one) new trials, each with the configuration it will measure (None: an
    invalid combination, pruned when it runs), claimed. `on_ask` sees each trial the moment it
    exists, before anything else is written to it (the study loop stamps it with its worker).
    Should asking fail, the trials asked are told as interrupted, never left running."""
    batch: list[tuple[Trial, Config | None]] = []
    try:
        for _ in range(max(1, n)):
            trial = study.ask()
            batch.append((trial, None))
            if on_ask is not None:
                on_ask(trial)
            config = space.suggest(trial)  # sampled now; the objective's suggest gets the same values
            if config is not None:
                claim(trial, config.key)
            batch[-1] = (trial, config)
    except BaseException:
        with told_if_left(study, [t for t, _ in batch]):
            pass  # none handed out: each is told
        raise
    return batch


def compile_ahead(runner: Runner, space: SearchSpace, configs: list[Config], stop: StopFlag) -> None:
    """Let a runner that can (the GPU's) compile many kernels at once, in parallel threads."""
    if configs:
        try:
            runner.prepare([(space.shape, space.dtype, c) for c in configs])
        except TrialInterrupted:
            stop.set()


@contextlib.contextmanager
def told_if_left(study: optuna.Study, trials: list[Trial]) -> Iterator[Iterator[Trial]]:
    """Yields an iterator over `trials`; those it did not hand out when the block ends (a stop
    request, an error) are told to the study as interrupted, so that no trial of this worker
    stays running in the study."""
    handed = 0

    def run() -> Iterator[Trial]:
        nonlocal handed
        for trial in trials:
            handed += 1
            yield trial

    try:
        yield run()
    finally:
        for trial in trials[handed:]:
            with contextlib.suppress(Exception):
                mark(trial, INTERRUPTED)
                study.tell(trial, state=TrialState.PRUNED)
