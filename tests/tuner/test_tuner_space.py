from __future__ import annotations

import optuna
import tuner_fakes as F

from tuner.study.space import SearchSpace
from variants import BASELINE, DTYPES, Shape, valid_configs


def test_space_holds_exactly_the_valid_configs_and_round_trips_them() -> None:
    space = SearchSpace(F.SHAPE, DTYPES["bf16"])
    assert sorted(c.key for c in space.configs) == sorted(
        c.key for c in valid_configs(F.SHAPE, DTYPES["bf16"])
    )
    for config in space.configs:
        trial = optuna.trial.FixedTrial(space.params_of(config))
        assert space.suggest(trial) == config
        assert space.config_of(space.params_of(config)) == config
    assert BASELINE in space


def test_invalid_combinations_are_not_offered_or_come_back_as_none() -> None:
    # HD=2 in bf16: 8- and 16-byte vectors do not divide a head; split takes only those.
    shape = Shape.parse("B=1,T=4,NH=4,NH_KV=2,HD=2")
    space = SearchSpace(shape, DTYPES["bf16"])
    assert "split" not in space.family_names
    assert space.offered["vec_bytes"] == (4,)
    fp32 = SearchSpace(shape, DTYPES["fp32"])
    assert fp32.offered["vec_bytes"] == (4, 8)  # vec takes 4 and 8, split only 8
    bad = {"family": "split", "block": 256, "vec_bytes": 4, "items": 1, "load": "plain", "store": "plain"}
    assert fp32.suggest(optuna.trial.FixedTrial(bad)) is None
