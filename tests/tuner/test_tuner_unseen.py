"""UnseenFirst keeps every trial on an unseen configuration, whatever the space's shape."""

from __future__ import annotations

import optuna
import pytest
import tuner_fakes as F

from tuner.study.loop import StudyLoop
from tuner.study.plan import StudyPlan
from variants import DTYPES, FAMILIES, valid_configs

optuna.logging.set_verbosity(optuna.logging.WARNING)


@pytest.mark.parametrize("ahead", [1, 8])
def test_a_study_of_one_family_spends_no_trial_on_a_repeat(ahead: int) -> None:
    """With one family the `family` parameter has one choice, which Optuna sets without asking
    the sampler: a trial then holds a parameter before its proposal is drawn, and that must not
    pass for a trial queued with its parameters (the proposals went unchecked, and TPE asked
    1,440 trials to measure 58 of a 144-configuration space)."""
    family = {"vec": FAMILIES["vec"]}
    size = len(valid_configs(F.SMALL, DTYPES["bf16"], family))
    assert size > 40
    plan = StudyPlan(
        gpu="h200",
        shape=F.SMALL,
        dtype=DTYPES["bf16"],
        study_name="one",
        sampler="tpe",
        seed=1,
        trials=40,
        ahead=ahead,
    )
    outcome = StudyLoop(plan, F.synthetic_runner(), None, families=family).run()
    assert len(outcome.measured) == 40
    assert outcome.answered == 0 and outcome.trials == 40, (outcome.trials, outcome.answered)
