from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

import optuna
import pytest
import tuner_fakes as F

from results.index import build_index, shape_tuple
from results.schema import DEFAULT_HOLD_US
from results.store import load_results, write_table
from tuner.run.pipeline import run_plans, tune
from tuner.run.request import TuneError, TuneRequest, study_plans
from tuner.run.rows import ResultsSink
from tuner.runners.bench import BenchRunner
from tuner.study.loop import StudyLoop
from tuner.study.plan import StudyPlan, default_study_name
from tuner.study.storage import make_storage
from variants import BASELINE, DTYPES, FAMILIES, Shape

optuna.logging.set_verbosity(optuna.logging.WARNING)
BF16 = DTYPES["bf16"]


def plan(**kw) -> StudyPlan:
    base = dict(gpu="h200", shape=F.SMALL, dtype=BF16, study_name="s", sampler="tpe", seed=1, trials=15)
    base.update(kw)
    return StudyPlan(**base)


def request(**kw) -> TuneRequest:
    base = dict(shapes=(F.SMALL,), dtypes=("bf16",), seed=0, trials=8, storage="memory", progress=False)
    base.update(kw)
    return TuneRequest(**base)


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("recording")
    F.write_recording(directory, [F.SMALL], ["bf16"])
    return directory


def test_tune_replays_a_recording_and_writes_only_where_asked(recording: Path, tmp_path: Path) -> None:
    lines: list[str] = []
    result = tune(request(replay_dir=recording), echo=lines.append)
    assert result.gpu == "h200" and result.device_name == "NVIDIA H200" and result.seed == 0
    assert not result.interrupted and result.rows == 0 and result.files == []
    assert len(result.outcomes) == 1 and len(result.outcomes[0].measured) == 8
    assert len(result.frame()) == 8
    header = f"tuning h200 (NVIDIA H200): 1 shapes x 1 dtypes, sampler tpe seed 0, run {result.run_id}"
    assert lines == [header]
    out = tmp_path / "out"
    again = tune(request(replay_dir=recording, results_dir=out, seed=None))
    frame, _ = load_results(out)
    assert again.rows == len(frame) == 8 and again.files == sorted((out / "h200").glob("*.parquet"))
    assert set(frame["seed"]) == {again.seed} and set(frame["run_id"]) == {again.run_id}


def test_tune_measures_with_the_runner_given_and_closes_it(tmp_path: Path) -> None:
    runner = F.RecordingRunner()
    shapes = (F.SMALL, Shape.parse("B=2,T=128,NH=8,NH_KV=2,HD=64"))
    asked = request(shapes=shapes, dtypes=("bf16", "fp16"), trials=3, results_dir=tmp_path, warm_start=0)
    result = tune(asked, runner)
    assert runner.closed and result.gpu == "h200"  # the label of the device's name
    assert [(o.plan.shape, o.plan.dtype.name) for o in result.outcomes] == [
        (s, d) for s in shapes for d in ("bf16", "fp16")
    ]
    frame, _ = load_results(tmp_path)
    assert len(frame) == result.rows == 12 and (tmp_path / "optuna.db").exists() is False  # storage: memory
    assert runner.calls[0][2] == BASELINE  # no warm start: the baseline first


def test_an_interrupted_tune_says_so_keeps_its_rows_and_resumes(tmp_path: Path) -> None:
    calls: Counter[str] = Counter()

    def bench(shape, dtype, config):
        calls[config.key] += 1
        if sum(calls.values()) == 5:
            raise KeyboardInterrupt
        return F.synthetic_bench(shape, dtype, config)

    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    first = tune(request(storage=storage, results_dir=tmp_path), F.RecordingRunner(bench))
    assert first.interrupted and first.rows == 4
    # what was measured before the interruption is in the result, for the report
    assert [o.interrupted for o in first.outcomes] == [True] and len(first.outcomes[0].measured) == 4
    second = tune(request(storage=storage, results_dir=tmp_path), F.RecordingRunner(bench))
    assert not second.interrupted
    frame, _ = load_results(tmp_path)
    assert frame["config_key"].is_unique and len(frame) == 8
    assert set(frame["run_id"]) == {first.run_id, second.run_id}


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        (dict(trials=0), "--trials must be at least 1"),
        (dict(dtypes=("fp8",)), "unknown dtype 'fp8'"),
        (dict(sampler="annealing"), "annealing"),
        (dict(gpu="h100"), "NVIDIA H200"),
        (dict(storage="nonsense"), "nonsense"),
        (dict(seed=-5), "--seed takes a whole number from 0 to 4294967295, not -5"),
        (dict(timeout_s=0), "--timeout takes seconds above 0"),
        (dict(timeout_s=-1.0), "--timeout takes seconds above 0"),
        (dict(trial_timeout_s=0), "--trial-timeout takes seconds above 0"),
        (dict(hold_us=-5.0), "--hold-us takes microseconds from 0"),
        (dict(storage="redis://localhost:6379"), "this tuner cannot keep a study there"),
    ],
)
def test_a_request_that_cannot_run_is_a_tune_error(kw: dict, message: str) -> None:
    runner = F.RecordingRunner()
    with pytest.raises(TuneError, match=message):
        tune(request(**kw), runner)
    assert runner.calls == []


def test_a_results_dir_that_cannot_take_rows_is_a_tune_error_before_measuring(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    runner = F.RecordingRunner()
    with pytest.raises(TuneError, match=r"--results .*file is a file"):
        tune(request(results_dir=tmp_path / "file"), runner)  # storage memory: rows were its only write
    with pytest.raises(TuneError, match=r"--storage journal:.*file is a file"):
        tune(request(results_dir=tmp_path / "out", storage=f"journal:{tmp_path}/file/optuna.journal"), runner)
    assert runner.calls == [] and sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_a_gpu_directory_that_cannot_take_rows_is_a_tune_error_before_measuring(tmp_path: Path) -> None:
    """<results>/<gpu> a file (or not writable) passed the checks, which know the results
    directory alone, and the run ended in a traceback when it wrote its first row."""
    (tmp_path / "h200").write_text("x")
    runner = F.RecordingRunner()
    with pytest.raises(TuneError, match=rf"^--results {tmp_path / 'h200'} is a file: give a directory"):
        tune(request(results_dir=tmp_path, gpu="h200"), runner)
    assert runner.calls == [] and runner.closed and sorted(p.name for p in tmp_path.iterdir()) == ["h200"]


def test_what_a_recording_lacks_is_a_tune_error_or_counted(recording: Path, tmp_path: Path) -> None:
    with pytest.raises(TuneError, match="a100"):
        tune(request(replay_dir=recording, gpu="a100"))
    with pytest.raises(TuneError, match="replay only the shapes and dtypes the recording holds"):
        tune(request(replay_dir=recording, dtypes=("fp32",)))
    rows = F.partial_recording_rows()
    write_table(rows, tmp_path / "h200", "partial")
    result = tune(request(replay_dir=tmp_path, sampler="grid"))
    # the gather configurations dropped are missing; the families never recorded are not tried
    dropped = len(FAMILIES["gather"].valid_configs(F.SMALL, DTYPES["bf16"])) - sum(
        r["family"] == "gather" for r in rows
    )
    assert result.missing == dropped == result.outcomes[0].missing
    assert set(result.frame()["family"]) == {"naive", "gather"}


def test_a_replay_refuses_a_shape_the_recording_lacks_before_replaying_any(
    recording: Path, tmp_path: Path
) -> None:
    """The recording's shape first, then one it lacks: the first was replayed and its rows
    written before the second failed, with no report of what had been measured."""
    out = tmp_path / "out"
    lacking = Shape(3, 77, F.SMALL.NH, F.SMALL.NH_KV, F.SMALL.HD)
    with pytest.raises(TuneError, match=r"no copy time for B=3,T=77.*replay only the shapes"):
        tune(request(replay_dir=recording, results_dir=out, shapes=(F.SMALL, lacking)))
    assert not list(out.rglob("*.parquet"))


def test_study_plans_name_one_study_per_shape_and_dtype() -> None:
    two = request(dtypes=("bf16", "fp16"), study="mine", sampler="grid")
    plans = study_plans(two, "h200", 7)
    names = [default_study_name("h200", F.SMALL, DTYPES[d], "mine") for d in two.dtypes]
    assert [p.study_name for p in plans] == names
    assert {(p.seed, p.trials, p.sampler) for p in plans} == {(7, None, "grid")}
    assert [p.study_name for p in study_plans(request(study="mine"), "h200", 7)] == ["mine"]
    assert study_plans(request(), "h200", 7)[0].study_name.startswith("repkv-")


def test_an_interrupted_run_resumes_without_measuring_anything_twice_or_losing_rows(tmp_path) -> None:
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    calls: Counter[str] = Counter()

    def bench(shape, dtype, config):
        calls[config.key] += 1
        if sum(calls.values()) == 7:
            raise KeyboardInterrupt
        return F.synthetic_bench(shape, dtype, config)

    runner = BenchRunner(bench, F.IDENTITY, F.copy_ms)
    first = ResultsSink(tmp_path, "h200", "run-1")
    (outcome,) = run_plans([plan(trials=12)], runner, make_storage(storage), run_id="run-1", sink=first)
    assert outcome.interrupted and runner.stop  # the interruption stops the run, it does not escape
    assert len(load_results(tmp_path)[0]) == 6  # every finished trial is on disk
    runner.stop = type(runner.stop)()
    # Resume from the same storage and results: the interrupted config may be measured
    # again (it was never recorded); nothing recorded is.
    stored = load_results(tmp_path)[0]
    second = ResultsSink(tmp_path, "h200", "run-2")
    run_plans([plan(trials=12)], runner, make_storage(storage), run_id="run-2", sink=second, stored=stored)
    frame, _ = load_results(tmp_path)
    assert frame["config_key"].is_unique
    assert frame["config_key"].nunique() == 12
    assert set(frame["run_id"]) == {"run-1", "run-2"}
    assert max(calls.values()) <= 2 and sum(1 for n in calls.values() if n == 2) <= 1


def test_configs_in_the_results_store_are_answered_not_measured(tmp_path) -> None:
    few = {n: FAMILIES[n] for n in ("naive", "gather", "vec")}  # 150 configurations, for the grid
    sink = ResultsSink(tmp_path, "h200", "old")
    old = plan(trials=10, study_name="old")
    StudyLoop(old, F.synthetic_runner(), None, run_id="old", sink=sink, families=few).run()
    sink.close()
    stored = load_results(tmp_path)[0]
    # A new study (another name, another seed) proposes some of the same configs.
    runner = F.synthetic_runner()
    new = [plan(sampler="grid", study_name="new")]
    outcomes = run_plans(new, runner, None, run_id="new", stored=stored, families=few)
    measured = {c.key for _, _, c in runner.calls}
    assert measured.isdisjoint(set(stored["config_key"]))
    assert len(measured) + 10 == outcomes[0].space_size
    assert len(outcomes[0].rows) == outcomes[0].space_size


def test_a_changed_kernel_source_is_measured_again(tmp_path) -> None:
    sink = ResultsSink(tmp_path, "h200", "old")
    StudyLoop(plan(trials=5), F.synthetic_runner(), None, run_id="old", sink=sink).run()
    stored = load_results(tmp_path)[0]
    stored["source_hash"] = "0" * 16
    runner = F.synthetic_runner()
    run_plans([plan(trials=5, study_name="other")], runner, None, run_id="new", stored=stored)
    assert len(runner.calls) == 5


def test_a_rerun_removes_what_a_writer_killed_mid_write_left(tmp_path: Path) -> None:
    import subprocess
    import sys

    from results.store import temp_prefix

    dead = int(
        subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True).stdout
    )
    left = tmp_path / "h200" / f"{temp_prefix(dead)}x1y2z3.parquet"
    left.parent.mkdir(parents=True)
    left.write_bytes(b"PAR1 half")
    tune(request(results_dir=tmp_path, trials=2), F.RecordingRunner())
    assert not left.exists() and len(load_results(tmp_path)[0]) == 2


def test_family_restricts_the_search_to_those_families_in_a_study_of_its_own(tmp_path: Path) -> None:
    runner = F.RecordingRunner()
    asked = request(trials=6, results_dir=tmp_path, warm_start=0, families=("tile", "split"))
    result = tune(asked, runner)
    (outcome,) = result.outcomes
    assert outcome.plan.study_name.endswith("/bf16/tile,split")
    assert outcome.plan.study_name.startswith(default_study_name("h200", F.SMALL, BF16))
    measured = {c.family for _, _, c in runner.calls}
    assert measured <= {"tile", "split", BASELINE.family} and "tile" in measured
    assert len(load_results(tmp_path)[0]) == result.rows


def test_a_family_unknown_or_too_new_for_the_gpu_is_refused_before_measuring(tmp_path: Path) -> None:
    with pytest.raises(TuneError, match="unknown family 'nope'"):
        tune(request(families=("nope",), results_dir=tmp_path))
    runner = F.RecordingRunner()
    runner.identity = F.IDENTITY.__class__(**{**F.IDENTITY.__dict__, "compute_capability": "8.0"})
    with pytest.raises(TuneError, match=r"family bulk needs compute capability 9\.0"):
        tune(request(families=("split", "bulk"), results_dir=tmp_path), runner)
    assert runner.closed and not runner.calls


def test_rows_timed_with_another_hold_are_measured_again_and_rank_after(tmp_path: Path) -> None:
    """A store timed without the hold (rows written before it, null) answers nothing to a
    run that holds: its leaders are queued first and measured again, the study has a name of
    its own, and the group then serves from the held rows."""
    old = F.RecordingRunner()  # its identity records no hold: rows read as hold 0
    tune(request(results_dir=tmp_path, trials=6, warm_start=0), old)
    before = build_index(load_results(tmp_path)[0]).groups[("h200", shape_tuple(F.SMALL), "bf16")]
    leaders = [c.config for c in before.candidates[:2]]

    held = F.RecordingRunner()
    held.identity = dataclasses.replace(held.identity, hold_us=DEFAULT_HOLD_US)
    result = tune(request(results_dir=tmp_path, trials=6, warm_start=2), held)
    (outcome,) = result.outcomes
    assert outcome.plan.study_name.endswith(f"/bf16/hold{DEFAULT_HOLD_US:g}us")
    assert [c for _, _, c in held.calls[:2]] == leaders  # the old leaders, measured again first
    assert len(held.calls) == 6 and outcome.answered == 0
    frame = load_results(tmp_path)[0]
    group = build_index(frame).groups[("h200", shape_tuple(F.SMALL), "bf16")]
    assert len(group.candidates) == len(set(frame["config_key"]))
    served = [c.hold_us for c in group.candidates]
    assert served[:6] == [DEFAULT_HOLD_US] * 6 and set(served[6:]) <= {0.0}

    again = F.RecordingRunner()
    again.identity = held.identity
    (rerun,) = tune(request(results_dir=tmp_path, trials=6, warm_start=2), again).outcomes
    # timed alike, the held rows fill the same study's budget and answer: nothing measured
    assert again.calls == [] and set(rerun.rows) == {c.key for _, _, c in held.calls}


def test_a_fed_run_measures_the_cold_leaders_again_in_a_study_of_its_own(tmp_path: Path) -> None:
    """Cold rows answer nothing to a run timed with L2 fed: its study has a name of its own,
    it first measures the shape's cold leaders again, and the store then ranks the fed rows
    apart, each state serving its own (GET /best?l2=fed)."""
    held = dataclasses.replace(F.RecordingRunner().identity, hold_us=DEFAULT_HOLD_US)
    cold = F.RecordingRunner()
    cold.identity = dataclasses.replace(held, l2="cold")
    tune(request(results_dir=tmp_path, trials=6, warm_start=0), cold)
    key = ("h200", shape_tuple(F.SMALL), "bf16")
    leaders = [c.config for c in build_index(load_results(tmp_path)[0]).groups[key].candidates[:2]]

    fed = F.RecordingRunner()
    fed.identity = dataclasses.replace(held, l2="fed")
    (outcome,) = tune(request(results_dir=tmp_path, trials=5, warm_start=4), fed).outcomes
    assert outcome.plan.study_name.endswith(f"/bf16/hold{DEFAULT_HOLD_US:g}us/fed")
    assert [c for _, _, c in fed.calls[:2]] == leaders  # measured again, fed
    assert len(fed.calls) == 5 and outcome.answered == 0
    frame = load_results(tmp_path)[0]
    assert sorted(frame["l2"].value_counts().items()) == [("cold", 6), ("fed", 5)]
    index = build_index(frame)
    assert len(index.groups[key].candidates) == 6 and len(index.in_state("fed").groups[key].candidates) == 5

    again = F.RecordingRunner()
    again.identity = fed.identity
    (rerun,) = tune(request(results_dir=tmp_path, trials=5, warm_start=4), again).outcomes
    assert again.calls == [] and set(rerun.rows) == {c.key for _, _, c in fed.calls}  # fed rows answer fed
