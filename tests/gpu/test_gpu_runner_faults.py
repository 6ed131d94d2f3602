"""On the GPU: every planted fault becomes a measurement with its status and an infinite
time, the worker is replaced after a hang or a crash, and later trials still measure."""

from __future__ import annotations

import math

import pytest
from faulty_family import FAULTY

from results.schema import Status
from variants import BASELINE, DTYPES, FAMILIES, Config, Shape

pytestmark = pytest.mark.gpu

SHAPE = Shape(2, 64, 8, 2, 32)


@pytest.fixture(scope="module")
def runner():
    from tuner.runners.gpu.runner import GpuRunner

    # 15 s: the first run on a cold CuPy cache compiles its own kernels too
    with GpuRunner(timeout_s=15.0, families={**FAMILIES, "faulty": FAULTY}, reps=10) as r:
        yield r


def measure(runner, mode: str):
    return runner.measure(SHAPE, DTYPES["fp32"], Config.of("faulty", mode=mode))


def test_identity(runner) -> None:
    assert runner.identity.sm_count > 0
    assert runner.identity.compute_capability.count(".") == 1


@pytest.mark.parametrize(
    ("mode", "status", "restarts"),
    [
        ("ok", Status.OK, 0),
        ("compile", Status.COMPILE_ERROR, 0),
        ("launch", Status.LAUNCH_ERROR, 0),
        ("wrong", Status.WRONG_RESULT, 0),
        ("crash", Status.CRASH, 1),
        ("ok", Status.OK, 0),
        ("hang", Status.TIMEOUT, 1),
        ("ok", Status.OK, 0),
    ],
)
def test_each_fault_is_recorded_and_the_runner_goes_on(
    runner, mode: str, status: Status, restarts: int
) -> None:
    before = runner.restarts
    result = measure(runner, mode)
    assert result.status == status, result.message
    assert runner.restarts - before == restarts
    if status == Status.OK:
        assert 0 < result.time_ms < math.inf and result.p20_ms <= result.time_ms <= result.p80_ms
    else:
        assert result.time_ms == math.inf and result.message
    if status == Status.COMPILE_ERROR:
        assert "planted compile error" in result.message
    if status == Status.WRONG_RESULT:
        assert "expected" in result.message and "dinp[b=" in result.message


def test_real_families_measure_after_faults(runner) -> None:
    result = runner.measure(SHAPE, DTYPES["bf16"], BASELINE)
    assert result.ok, result.message
    assert runner.copy_time(SHAPE, DTYPES["bf16"]) > 0


def test_a_study_over_planted_faults_records_each_and_completes(tmp_path) -> None:
    """The whole loop on the GPU: a grid study over the faulty family (plus llm.c's baseline)
    measures every configuration, files every fault as a row with its status, and ends."""
    from results.store import load_results
    from tuner.run.rows import ResultsSink
    from tuner.runners.gpu.runner import GpuRunner
    from tuner.study.loop import StudyLoop
    from tuner.study.plan import StudyPlan

    families = {"naive": FAMILIES["naive"], "faulty": FAULTY}
    plan = StudyPlan(
        gpu="gpu", shape=SHAPE, dtype=DTYPES["fp32"], study_name="faults", sampler="grid", seed=0
    )
    with GpuRunner(timeout_s=15.0, families=families, reps=10) as runner:
        sink = ResultsSink(tmp_path, "gpu", "faults")
        StudyLoop(plan, runner, None, run_id="faults", sink=sink, families=families).run()
        sink.flush()
        assert runner.restarts == 2  # after the crash and after the hang
    frame, _ = load_results(tmp_path, families=families)  # the faulty family is no real one
    status = dict(zip(frame["config_key"], frame["status"], strict=True))
    assert status == {
        **{Config.of("naive", block=b).key: Status.OK for b in (32, 64, 128, 256, 512, 1024)},
        "faulty[mode=ok]": Status.OK,
        "faulty[mode=wrong]": Status.WRONG_RESULT,
        "faulty[mode=hang]": Status.TIMEOUT,
        "faulty[mode=crash]": Status.CRASH,
        "faulty[mode=launch]": Status.LAUNCH_ERROR,
        "faulty[mode=compile]": Status.COMPILE_ERROR,
    }
    failed = frame[frame["status"] != Status.OK]
    assert (failed["time_ms"] == math.inf).all() and failed["message"].str.len().gt(0).all()
