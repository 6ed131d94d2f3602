"""A sampler that spends every trial on a configuration the study has not seen.

TPE concentrates: once it believes it knows the best region it proposes configurations it
has already measured, again and again (three workers asked for 450 configurations once ran
3,017 trials for 138 distinct ones). `UnseenFirst` wraps any Optuna sampler: it lets the
sampler propose a whole configuration (its relative sample, completed by its independent
sampling of the parameters it left out), and when that configuration is invalid, already
answered in the study, claimed by a running trial or missing from a replayed recording, it
returns instead the unseen configuration nearest to the proposal (same family first, then
the most parameters in common; ties broken by the seeded generator). The proposal itself is
kept whenever it is new, so the sampler's choices stand wherever they can.

Trials whose parameters are fixed in advance (llm.c's configuration queued first, a dead
worker's configuration queued again) are left as they are; a trial that holds only parameters
of one choice (Optuna sets those without asking) is not one of them. When every configuration has been
seen the sampler's proposal is returned unchanged, and the study loop stops.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.samplers import BaseSampler
from optuna.trial import FrozenTrial, TrialState

from tuner.study.space import FAMILY_PARAM, SearchSpace, param_name
from variants import Config


class UnseenFirst(BaseSampler):
    def __init__(
        self,
        base: BaseSampler,
        space: SearchSpace,
        excluded: Callable[[], set[str]],
        seed: int | None = None,
    ) -> None:
        self.base = base
        self.space = space
        self.excluded = excluded  # the keys a new trial must not take, read when it starts
        self._rng = random.Random(seed)
        self.distributions: dict[str, BaseDistribution] = {
            FAMILY_PARAM: CategoricalDistribution(space.family_names)
        }
        for name, choices in space.offered.items():
            self.distributions[name] = CategoricalDistribution(choices)
        self._base_spaces: dict[int, dict[str, BaseDistribution]] = {}
        self.substituted = 0  # proposals replaced by an unseen configuration

    # --- the sampler contract, delegated ---------------------------------------------------
    def reseed_rng(self) -> None:
        self.base.reseed_rng()
        self._rng = random.Random()

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self.base.before_trial(study, trial)

    def after_trial(
        self,
        study: optuna.Study,
        trial: FrozenTrial,
        state: TrialState,
        values: Sequence[float] | None,
    ) -> None:
        self._base_spaces.pop(trial.number, None)
        self.base.after_trial(study, trial, state, values)

    def sample_independent(
        self, study: optuna.Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        return self.base.sample_independent(study, trial, param_name, param_distribution)

    def infer_relative_search_space(
        self, study: optuna.Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        base_space = self.base.infer_relative_search_space(study, trial)
        self._base_spaces[trial.number] = base_space
        return {**base_space, **self.distributions}

    # --- the proposal ---------------------------------------------------------------------
    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        base_space = self._base_spaces.pop(trial.number, None)
        if base_space is None:
            base_space = self.base.infer_relative_search_space(study, trial)
        if trial.system_attrs.get("fixed_params"):
            return {}  # queued with its parameters: they stand
        # A parameter of one choice (`family` in a study of one family) is set by Optuna without
        # asking the sampler, so a trial may hold it already: the proposal is checked all the same.
        proposal = dict(self.base.sample_relative(study, trial, base_space))
        excluded = self.excluded()
        unseen = [c for c in self.space.configs if c.key not in excluded]
        if not unseen:
            return proposal
        config = self._complete(study, trial, proposal)
        if config is None or config.key in excluded:
            config = self.nearest(config, proposal, unseen)
            self.substituted += 1
        return self.space.params_of(config)

    def _complete(self, study: optuna.Study, trial: FrozenTrial, proposal: dict[str, Any]) -> Config | None:
        """The configuration the base sampler proposes: its relative sample, and its own
        independent choice for each parameter that sample left out."""
        family = proposal.get(FAMILY_PARAM)
        if family not in self.space.params:
            family = self.base.sample_independent(
                study, trial, FAMILY_PARAM, self.distributions[FAMILY_PARAM]
            )
        values = {}
        for name in self.space.params[family]:
            pname = param_name(family, name)
            value = proposal.get(pname)
            if value is None or value not in self.space.offered[pname]:
                value = self.base.sample_independent(study, trial, pname, self.distributions[pname])
            values[name] = value
        config = Config.of(family, **values)
        return config if config.key in self.space.keys else None

    def nearest(self, config: Config | None, proposal: dict[str, Any], unseen: list[Config]) -> Config:
        """The unseen configuration closest to what was proposed."""
        family = config.family if config is not None else proposal.get(FAMILY_PARAM)
        values = dict(config.values) if config is not None else proposal

        def score(c: Config) -> int:
            same = sum(1 for k, v in c.values.items() if values.get(k) == v)
            return (100 if c.family == family else 0) + same

        best = max(score(c) for c in unseen)
        return self._rng.choice([c for c in unseen if score(c) == best])
