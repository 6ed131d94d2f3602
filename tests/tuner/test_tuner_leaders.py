"""A run that measured something new for a group also measures again the group's leaders of
other studies (`tuner.run.leaders`), so that the store ranks its rows against theirs within one
run (`results.best.run_factors`), not across the drift between runs."""

from __future__ import annotations

from pathlib import Path

import optuna
import tuner_fakes as F

from results.index import build_index, shape_tuple
from results.store import load_results
from tuner.run.leaders import LEADERS_AGAIN, leaders_of_other_runs
from tuner.run.pipeline import tune
from tuner.run.request import TuneRequest
from tuner.study.plan import StudyPlan
from variants import DTYPES

optuna.logging.set_verbosity(optuna.logging.WARNING)
BF16 = DTYPES["bf16"]
GROUP = ("h200", shape_tuple(F.SMALL), "bf16")


def request(**kw) -> TuneRequest:
    base = dict(shapes=(F.SMALL,), dtypes=("bf16",), seed=0, trials=6, storage="memory", progress=False)
    base.update(kw)
    return TuneRequest(**base)


def test_a_new_studys_run_measures_the_groups_leaders_again_and_is_linked_to_them(tmp_path: Path) -> None:
    first = F.RecordingRunner()
    tune(request(results_dir=tmp_path, families=("vec",), warm_start=0), first)
    leaders = [
        c.config for c in build_index(load_results(tmp_path)[0]).groups[GROUP].candidates[:LEADERS_AGAIN]
    ]

    second = F.RecordingRunner()
    result = tune(request(results_dir=tmp_path, families=("gather",), warm_start=0), second)
    (outcome,) = result.outcomes
    assert len(outcome.measured) == 6 and outcome.again == LEADERS_AGAIN
    assert [c for _, _, c in second.calls[-LEADERS_AGAIN:]] == leaders  # measured, after its own study
    frame = load_results(tmp_path)[0]
    mine = frame[frame["run_id"] == result.run_id]
    assert len(mine) == 6 + LEADERS_AGAIN and {c.key for c in leaders} <= set(mine["config_key"])
    assert set(mine["study"]) == {
        outcome.plan.study_name,
        f"{outcome.plan.study_name}/leaders/{result.run_id}",
    }
    # the two runs now share exactly the leaders: run_factors links the second to the first
    theirs = set(frame.loc[frame["run_id"] != result.run_id, "config_key"])
    assert set(mine["config_key"]) & theirs == {c.key for c in leaders}

    # run again: the studies are done, nothing is measured, so no leaders either
    third = F.RecordingRunner()
    (again,) = tune(request(results_dir=tmp_path, families=("gather",), warm_start=0), third).outcomes
    assert third.calls == [] and again.again == 0


def test_a_warm_start_answered_from_the_store_still_leaves_the_run_to_link(tmp_path: Path) -> None:
    tune(request(results_dir=tmp_path, families=("vec",), warm_start=0), F.RecordingRunner())
    second = F.RecordingRunner()  # its warm start is answered from the store, not measured
    (outcome,) = tune(
        request(results_dir=tmp_path, families=("vec", "gather"), warm_start=2), second
    ).outcomes
    assert outcome.answered == 2 and outcome.again == LEADERS_AGAIN


def test_leaders_come_from_other_studies_of_the_group_and_the_families_searched(tmp_path: Path) -> None:
    tune(request(results_dir=tmp_path, families=("vec",), warm_start=0), F.RecordingRunner())
    frame = load_results(tmp_path)[0]
    study = str(frame["study"].iloc[0])
    plan = StudyPlan(gpu="h200", shape=F.SMALL, dtype=BF16, study_name="other")
    found = leaders_of_other_runs(frame, plan, "repkv_backward", "run-x", set())
    assert [c.family for c in found] == ["vec"] * LEADERS_AGAIN
    assert found == [c.config for c in build_index(frame).groups[GROUP].candidates[:LEADERS_AGAIN]]
    # a fleet's workers share a study: its rows are no other study's leaders
    same = StudyPlan(gpu="h200", shape=F.SMALL, dtype=BF16, study_name=study)
    assert leaders_of_other_runs(frame, same, "repkv_backward", "run-x", set()) == []
    assert (
        leaders_of_other_runs(frame, plan, "repkv_backward", "run-x", set(), families={"gather": None}) == []
    )
    assert leaders_of_other_runs(None, plan, "repkv_backward", "run-x", set()) == []
    # a run that measured one of their configurations shares it with them: linked already
    assert leaders_of_other_runs(frame, plan, "repkv_backward", "run-x", {found[0].key}) == []
    other_gpu = StudyPlan(gpu="h100", shape=F.SMALL, dtype=BF16, study_name="other")
    assert leaders_of_other_runs(frame, other_gpu, "repkv_backward", "run-x", set()) == []


def test_leaders_are_the_fastest_of_each_leading_family_before_the_next_of_one(tmp_path: Path) -> None:
    """The leaders are the best configuration of each of the two fastest families, wherever the
    second family's best ranks, so that the families contending for a group meet in one run."""
    tune(
        request(results_dir=tmp_path, families=("vec", "gather"), warm_start=0, trials=12),
        F.RecordingRunner(),
    )
    frame = load_results(tmp_path)[0]
    ranked = build_index(frame).groups[GROUP].candidates
    families = list(dict.fromkeys(c.family.name for c in ranked))
    assert families[:2] == ["vec", "gather"] and ranked[1].family.name == "vec"  # two vec rows lead
    plan = StudyPlan(gpu="h200", shape=F.SMALL, dtype=BF16, study_name="other")
    found = leaders_of_other_runs(frame, plan, "repkv_backward", "run-x", set())
    assert found == [next(c.config for c in ranked if c.family.name == name) for name in families[:2]]


def test_remeasure_runs_no_study_and_measures_the_groups_leaders_again_together(tmp_path: Path) -> None:
    tune(request(results_dir=tmp_path, families=("vec",), warm_start=0), F.RecordingRunner())
    tune(request(results_dir=tmp_path, families=("gather",), warm_start=0), F.RecordingRunner())
    order = build_index(load_results(tmp_path)[0]).groups[GROUP].candidates
    expected = [order[0].config, next(c.config for c in order if c.family.name != order[0].family.name)]

    runner = F.RecordingRunner()
    result = tune(request(results_dir=tmp_path, remeasure=2), runner)
    (outcome,) = result.outcomes
    assert [c for _, _, c in runner.calls] == expected  # the two fastest families' best, nothing else
    assert outcome.again == 2 and outcome.plan.study_name.endswith(f"/remeasure/leaders/{result.run_id}")
    frame = load_results(tmp_path)[0]
    assert set(frame.loc[frame["run_id"] == result.run_id, "config_key"]) == {c.key for c in expected}
    # the group's candidates now stand by these rows, their newest
    regrouped = build_index(frame).groups[GROUP].candidates
    assert {c.run_id for c in regrouped if c.config_key in {e.key for e in expected}} == {result.run_id}


def test_remeasure_of_a_group_nothing_was_stored_for_measures_nothing(tmp_path: Path) -> None:
    runner = F.RecordingRunner()
    result = tune(request(results_dir=tmp_path, remeasure=2, bundled=False), runner)
    assert runner.calls == [] and result.outcomes == []
