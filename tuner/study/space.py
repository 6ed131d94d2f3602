"""The Optuna encoding of the variants' search space for one (shape, dtype).

A trial first picks `family` (categorical), then that family's parameters (a conditional
space: a family's parameters are only asked for when it is picked). A parameter keeps its
name across families (`block` of naive is `block` of split), and its choices under that
name are the union over the families that take it; TPE with `group=True` models the
parameters that occur together jointly.

Only values that appear in at least one valid configuration are offered: a family that
cannot serve the shape is not offered at all, and a parameter value that every
configuration rejects (a 4-byte vector of fp32 where HD is odd, ...) is left out. A
combination of offered values can still be rejected (split offered vec_bytes=4, which
only vec takes); `SearchSpace.config` then returns
None and the study prunes the trial without measuring it (no row is written: nothing was
run). TPE counts a pruned trial among the bad ones, so it learns to avoid the combination.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from variants import FAMILIES, Config, DType, Family, Shape

FAMILY_PARAM = "family"


class SuggestsCategorical(Protocol):
    def suggest_categorical(self, name: str, choices: Any) -> Any: ...


def param_name(family: str, param: str) -> str:
    """Parameters share one name across families (`block`, `load`, `store`, ...), so that
    TPE carries what it learned in one family to the next (measured against per-family
    names with `replay-eval`: fewer trials to the optimum)."""
    return param


class SearchSpace:
    """Every valid configuration of (shape, dtype), and its encoding as Optuna parameters."""

    def __init__(self, shape: Shape, dtype: DType, families: Mapping[str, Family] | None = None) -> None:
        self.shape = shape
        self.dtype = dtype
        self.families: dict[str, Family] = dict(FAMILIES if families is None else families)
        self.configs: list[Config] = [
            c for family in self.families.values() for c in family.valid_configs(shape, dtype)
        ]
        self.keys: frozenset[str] = frozenset(c.key for c in self.configs)
        # The parameters each family is asked for, and the values offered under each name.
        self.params: dict[str, tuple[str, ...]] = {}
        self.offered: dict[str, tuple[Any, ...]] = {}
        for name, family in self.families.items():
            valid = [c.values for c in self.configs if c.family == name]
            if not valid:
                continue
            self.params[name] = tuple(p.name for p in family.params)
            for p in family.params:
                seen = self.offered.get(param_name(name, p.name), ())
                new = [v for v in p.choices if v not in seen and any(vals[p.name] == v for vals in valid)]
                self.offered[param_name(name, p.name)] = (*seen, *new)

    def __len__(self) -> int:
        return len(self.configs)

    def __contains__(self, config: object) -> bool:
        return isinstance(config, Config) and config.key in self.keys

    @property
    def family_names(self) -> tuple[str, ...]:
        return tuple(self.params)

    def suggest(self, trial: SuggestsCategorical) -> Config | None:
        """Ask the trial for a family and its parameters; None if the combination is invalid."""
        family = trial.suggest_categorical(FAMILY_PARAM, self.family_names)
        values = {
            name: trial.suggest_categorical(param_name(family, name), self.offered[param_name(family, name)])
            for name in self.params[family]
        }
        config = Config.of(family, **values)
        return config if config.key in self.keys else None

    def params_of(self, config: Config) -> dict[str, Any]:
        """The Optuna parameters that encode config (for `study.enqueue_trial`)."""
        params: dict[str, Any] = {FAMILY_PARAM: config.family}
        params.update({param_name(config.family, k): v for k, v in config.params})
        return params

    def config_of(self, params: Mapping[str, Any]) -> Config | None:
        """The configuration a finished trial's parameters encode (None if invalid)."""
        family = params.get(FAMILY_PARAM)
        if family not in self.params:
            return None
        try:
            values = {name: params[param_name(family, name)] for name in self.params[family]}
        except KeyError:
            return None
        config = Config.of(family, **values)
        return config if config.key in self.keys else None
