"""The samplers `--sampler` offers, by name: a small registry of Optuna samplers.

`grid` enumerates every valid configuration: the study enqueues them all, so the sampler
behind it never has to choose (a random sampler stands in for anything left unfixed).
"""

from __future__ import annotations

import importlib.util
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING

from variants.errors import RepkvTuneError

if TYPE_CHECKING:  # Optuna is imported when a sampler is made: the names are offered without it
    from optuna.samplers import BaseSampler

# TPE's random start before it models the space (after llm.c's configuration, which is
# always measured first). Chosen with `python -m tuner replay-eval` (see README).
TPE_STARTUP_TRIALS = 5


class UnavailableSampler(RepkvTuneError, ValueError):
    """A sampler whose optional dependencies are not installed, or an unknown name."""


def _tpe(seed: int | None) -> BaseSampler:
    import optuna

    # multivariate + group: each family's parameters are modelled jointly, and the
    # conditional space (parameters that exist for one family only) stays well-defined.
    return optuna.samplers.TPESampler(
        seed=seed,
        n_startup_trials=TPE_STARTUP_TRIALS,
        multivariate=True,
        group=True,
        constant_liar=True,  # fleet workers do not all pick the point another is measuring
    )


def _random(seed: int | None) -> BaseSampler:
    import optuna

    return optuna.samplers.RandomSampler(seed=seed)


def _qmc(seed: int | None) -> BaseSampler:
    import optuna

    return optuna.samplers.QMCSampler(seed=seed, warn_independent_sampling=False)


def _cmaes(seed: int | None) -> BaseSampler:
    import optuna

    return optuna.samplers.CmaEsSampler(seed=seed, warn_independent_sampling=False)


def _gp(seed: int | None) -> BaseSampler:
    import optuna

    return optuna.samplers.GPSampler(seed=seed)


def _nsga2(seed: int | None) -> BaseSampler:
    import optuna

    return optuna.samplers.NSGAIISampler(seed=seed)


SAMPLERS: dict[str, Callable[[int | None], BaseSampler]] = {
    "tpe": _tpe,
    "random": _random,
    "grid": _random,
    "qmc": _qmc,
    "cmaes": _cmaes,
    "gp": _gp,
    "nsgaii": _nsga2,
}
# Python packages a sampler needs beyond Optuna itself.
REQUIRES: dict[str, tuple[str, ...]] = {
    "qmc": ("scipy",),
    "cmaes": ("cmaes",),
    "gp": ("torch", "scipy"),
}


def make_sampler(name: str, seed: int | None) -> BaseSampler:
    try:
        factory = SAMPLERS[name]
    except KeyError:
        raise UnavailableSampler(f"unknown sampler {name!r}; expected one of {', '.join(SAMPLERS)}") from None
    missing = [m for m in REQUIRES.get(name, ()) if importlib.util.find_spec(m) is None]
    if missing:
        raise UnavailableSampler(
            f"sampler {name} needs {', '.join(missing)}: pip install {' '.join(missing)}"
        )
    import optuna

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return factory(seed)
