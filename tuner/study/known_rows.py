"""What a study loop knows of its (GPU, shape, dtype): a row per configuration key.

Rows come from three places: the results store (read before the study starts and right
before each measurement), other trials of the study (a configuration another worker
measured: its row is rebuilt from what the trial recorded, for the answer and the report,
and is not written again), and this worker's own measurements.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from optuna.trial import FrozenTrial, Trial

from tuner.run.rows import StudyInfo, trial_row
from tuner.runners.runner import GpuIdentity
from tuner.study.claims import ATTR_KEY, ATTR_STATUS, ATTR_TIME, NOTHING_MEASURED, recorded
from tuner.study.space import SearchSpace
from variants import Family


class KnownRows(dict[str, dict[str, Any]]):
    """config key -> row, for one study's (GPU, shape, dtype)."""

    def __init__(
        self,
        space: SearchSpace,
        identity: GpuIdentity,
        gpu: str,
        study_name: str,
        families: Mapping[str, Family],
        rows: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        super().__init__((k, dict(v)) for k, v in (rows or {}).items() if k in space.keys)
        self.space = space
        self.identity = identity
        self.gpu = gpu
        self.study_name = study_name
        self.families = families

    def from_trial(self, key: str, trial: FrozenTrial) -> dict[str, Any]:
        """The row of a configuration another trial measured."""
        if key in self:
            return self[key]
        config = self.space.config_of(trial.params)
        if config is None or config.key != key:
            config = next(c for c in self.space.configs if c.key == key)
        measurement, copy_ms = recorded(trial)
        info = StudyInfo(gpu=self.gpu, run_id="", study=self.study_name, trial=trial.number)
        row = trial_row(
            self.identity,
            self.space.shape,
            self.space.dtype,
            config,
            measurement,
            copy_ms,
            info,
            self.families,
        )
        self[key] = row
        return row

    def inherited(self, trial: Trial) -> dict[str, Any] | None:
        """A dead worker's trial queued again carries what it recorded, if it got that far
        (its row was written first): the answer, without measuring it a second time."""
        attrs = trial.user_attrs
        key = attrs.get(ATTR_KEY)
        if key not in self.space.keys or ATTR_TIME not in attrs or attrs.get(ATTR_STATUS) in NOTHING_MEASURED:
            return None
        return self.from_trial(key, trial.study._storage.get_trial(trial._trial_id))
