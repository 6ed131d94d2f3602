"""The warm start: a new shape's study measures the winners of the nearest tuned shapes first."""

from __future__ import annotations

import json

import optuna
import pandas as pd
import tuner_fakes as F

from results.index import build_index, shape_tuple
from results.selection import serving
from tuner.run.pipeline import tune
from tuner.run.request import TuneRequest
from tuner.study import replay_eval
from tuner.study.loop import StudyLoop
from tuner.study.plan import StudyPlan
from tuner.study.space import SearchSpace
from tuner.study.warm_start import enqueue, index_of, shape_held_out, warm_start_configs, with_warm_start
from variants import BASELINE, DTYPES, Config, Shape

optuna.logging.set_verbosity(optuna.logging.WARNING)
BF16, FP32 = DTYPES["bf16"], DTYPES["fp32"]
NEAR = Shape.parse("B=2,T=256,NH=14,NH_KV=2,HD=64")  # distance 1 (tokens) from F.SMALL's layout
FAR = Shape.parse("B=8,T=256,NH=14,NH_KV=2,HD=64")
NEW = Shape.parse("B=4,T=256,NH=14,NH_KV=2,HD=64")  # nobody tuned it


def rows_of(shape: Shape, dtype: str, times: dict[Config, float]) -> list[dict]:
    """A tuned group whose configurations ran in `times` (ms)."""
    out = []
    for row in F.recording_rows([shape], [dtype]):
        config = Config.of(row["family"], **json.loads(row["params"]))
        if config in times:
            out.append({**row, "time_ms": times[config]})
    return out


def configs(n: int, shape: Shape = NEW, dtype=BF16) -> list[Config]:
    return [c for c in SearchSpace(shape, dtype).configs if c != BASELINE][:n]


def index_with(groups: list[list[dict]]):
    return build_index(pd.DataFrame([r for g in groups for r in g]))


def test_the_nearest_shapes_winners_and_runners_up_come_first() -> None:
    a, b, c, d = configs(4)
    index = index_with(
        [rows_of(NEAR, "bf16", {a: 1.0, b: 1.1, c: 1.5}), rows_of(FAR, "bf16", {c: 1.0, d: 1.2, a: 1.3})]
    )
    assert warm_start_configs(index.groups_of("h200"), NEW, BF16, size=4) == [a, b, c, d]
    assert warm_start_configs(index.groups_of("h200"), NEW, BF16, size=4, per_shape=1) == [a, c]
    assert warm_start_configs(index.groups_of("h200"), NEW, BF16, size=0) == []
    assert warm_start_configs(index.groups_of("other"), NEW, BF16) == []  # another GPU's results: none


def test_the_group_being_tuned_and_held_out_shapes_are_left_out() -> None:
    a, b, c, _ = configs(4)
    index = index_with(
        [
            rows_of(NEW, "bf16", {c: 1.0}),
            rows_of(NEW, "fp32", {b: 1.0}),
            rows_of(NEAR, "bf16", {a: 1.0}),
        ]
    )
    # its own rows answer anyway; the same shape in another dtype is a tier-2 neighbour
    assert warm_start_configs(index.groups_of("h200"), NEW, BF16) == [a, b]
    held_out = shape_held_out(index, "h200", NEW)
    assert held_out == {("h200", shape_tuple(NEW), "bf16"), ("h200", shape_tuple(NEW), "fp32")}
    assert warm_start_configs(index.groups_of("h200"), NEW, BF16, exclude=held_out) == [a]


def test_only_configurations_valid_for_the_new_shape_are_queued() -> None:
    index = build_index(
        pd.DataFrame(F.recording_rows([Shape.parse("B=1,T=256,NH=14,NH_KV=2,HD=128")], ["bf16"]))
    )
    odd = Shape.parse("B=1,T=255,NH=14,NH_KV=2,HD=72")
    found = warm_start_configs(index.groups_of("h200"), odd, BF16, size=4)
    space = SearchSpace(odd, BF16)
    assert found and all(c in space for c in found)
    assert len(set(found)) == len(found)
    served = [ch.candidate.config for ch in serving(index.groups_of("h200"), odd, BF16)]
    assert found == served[: len(found)] or set(found) <= set(served)


def test_the_study_measures_the_warm_start_in_order_then_the_baseline() -> None:
    a, b, c = configs(3, F.SMALL)
    runner = F.RecordingRunner()
    plan = StudyPlan("h200", F.SMALL, BF16, "s", seed=0, trials=6, warm_start=(a, b, c))
    outcome = StudyLoop(plan, runner, None, known={}).run()
    asked = [call[2] for call in runner.calls]
    assert asked[:4] == [a, b, c, BASELINE] and len(set(asked)) == len(asked) == 6
    assert [k for k, _ in outcome.measured][:4] == [a.key, b.key, c.key, BASELINE.key]


def test_a_warm_configuration_already_known_is_not_queued_or_measured() -> None:
    a, b = configs(2, F.SMALL)
    known_row = F.recording_rows([F.SMALL], ["bf16"])
    known = {r["config_key"]: r for r in known_row if r["config_key"] == a.key}
    runner = F.RecordingRunner()
    plan = StudyPlan("h200", F.SMALL, BF16, "s", seed=0, trials=4, warm_start=(a, b))
    StudyLoop(plan, runner, None, known=known).run()
    asked = [call[2] for call in runner.calls]
    assert a not in asked and asked[:2] == [b, BASELINE]


def test_enqueue_skips_what_is_queued_already() -> None:
    a, b = configs(2, F.SMALL)
    study = optuna.create_study()
    space = SearchSpace(F.SMALL, BF16)
    assert enqueue(study, space, [a, b, a]) == 2
    assert enqueue(study, space, [b]) == 0


def test_with_warm_start_reads_every_index_given() -> None:
    a, _ = configs(2)
    plan = StudyPlan("h200", NEW, BF16, "s")
    near = index_of(pd.DataFrame(rows_of(NEAR, "bf16", {a: 1.0})))
    assert index_of(pd.DataFrame()) is None and index_of(None) is None
    assert with_warm_start(plan, [None, None], 4) is plan
    assert with_warm_start(plan, [None, near], 4).warm_start == (a,)
    assert with_warm_start(plan, [near], 0) is plan


def test_a_run_warm_starts_each_shape_from_the_shapes_it_tuned_before(tmp_path) -> None:
    runner = F.RecordingRunner()
    request = TuneRequest(
        shapes=(NEAR, NEW),
        dtypes=("bf16",),
        seed=0,
        trials=5,
        storage="memory",
        progress=False,
        results_dir=tmp_path,
        bundled=False,
    )
    result = tune(request, runner)
    first = result.outcomes[0]
    best_near = min(first.measured, key=lambda kv: kv[1])[0]
    second_calls = [c[2].key for c in runner.calls if c[0] == NEW]
    assert second_calls[0] == best_near  # the winner of the shape tuned just before
    assert runner.calls[0][2] == BASELINE  # nothing tuned before the first: the baseline first


def test_replay_eval_with_a_warm_start_holds_the_shape_out_and_needs_fewer_trials(tmp_path) -> None:
    shapes = [F.SMALL, NEAR, FAR]
    F.write_recording(tmp_path, shapes, ["bf16"])
    frame = replay_eval.load(tmp_path)
    results = replay_eval.evaluate(frame, samplers=("tpe", "tpe+warm"), seeds=3, max_trials=80)
    medians = replay_eval.overall_medians(results)
    assert set(medians) == {"tpe", "tpe+warm"}
    assert medians["tpe+warm"] <= 2 < medians["tpe"]


def test_the_groups_own_leaders_come_first_where_they_were_timed_with_another_hold() -> None:
    a, b, c, d = configs(4)
    own = [{**r, "hold_us": None} for r in rows_of(NEW, "bf16", {a: 1.0, b: 1.1, c: 1.2})]
    index = index_with([own, rows_of(NEAR, "bf16", {d: 1.0})])
    groups = index.groups_of("h200")
    assert warm_start_configs(groups, NEW, BF16, size=3, hold_us=150.0) == [a, b, c]
    assert warm_start_configs(groups, NEW, BF16, size=4, hold_us=150.0) == [a, b, c, d]
    assert warm_start_configs(groups, NEW, BF16, size=3, hold_us=0.0) == [d]  # they answer
    assert warm_start_configs(groups, NEW, BF16, size=3) == [d]  # a run that names no hold
