from __future__ import annotations

from pathlib import Path

import pytest
import tuner_fakes as F

from results.schema import Status
from tuner.runners.replay import NoRecording, ReplayRunner
from variants import BASELINE, DTYPES

SMALL_KEY = "B=1,T=256,NH=14,NH_KV=2,HD=64"


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("recording")
    F.write_recording(directory, [F.SMALL], ["bf16"])
    return directory


def test_replay_answers_recorded_configs_and_reports_missing_ones(recording: Path) -> None:
    runner = ReplayRunner.from_directory(recording)
    assert runner.gpu == "h200" and runner.identity.name == "NVIDIA H200" and runner.identity.sm_count == 132
    bf16 = DTYPES["bf16"]
    assert runner.copy_time(F.SMALL, bf16) == pytest.approx(F.copy_ms(F.SMALL, bf16))
    answer = runner.measure(F.SMALL, bf16, BASELINE)
    assert answer.ok and answer.time_ms == pytest.approx(F.synthetic_ms(F.SMALL, bf16, BASELINE))
    missing = runner.measure(F.SHAPE, bf16, BASELINE)
    assert missing.status == Status.MISSING
    assert sum(runner.missing.values()) == 1
    with pytest.raises(NoRecording, match="copy time"):
        runner.copy_time(F.SMALL, DTYPES["fp32"])
    with pytest.raises(NoRecording, match="h200"):
        ReplayRunner.from_directory(recording, "a100")


def test_a_replay_names_the_recordings_empty_launch(tmp_path: Path) -> None:
    from results.store import write_table

    rows = [{**r, "empty_launch_ms": 0.004} for r in F.recording_rows([F.SMALL], ["bf16"])[:10]]
    write_table(rows, tmp_path / "h200", "timed")
    assert ReplayRunner.from_directory(tmp_path).identity.empty_launch_ms == pytest.approx(0.004)


def test_a_replay_names_how_the_recording_timed_its_copies(tmp_path: Path) -> None:
    from results.store import write_table

    rows = F.recording_rows([F.SMALL], ["bf16"])[:10]
    write_table(rows, tmp_path / "before", "memcpy")
    assert ReplayRunner.from_directory(tmp_path / "before").identity.copy_method is None
    write_table([{**r, "copy_method": "fastest"} for r in rows], tmp_path / "after", "fastest")
    assert ReplayRunner.from_directory(tmp_path / "after").identity.copy_method == "fastest"


def test_a_replay_names_the_recordings_hold_or_none(tmp_path: Path) -> None:
    from results.store import write_table

    rows = F.recording_rows([F.SMALL], ["bf16"])[:10]
    write_table(rows, tmp_path / "h200", "unheld")
    assert ReplayRunner.from_directory(tmp_path).identity.hold_us is None  # written before it was recorded
    write_table([{**r, "hold_us": 150.0} for r in rows], tmp_path / "h200", "held")
    assert ReplayRunner.from_directory(tmp_path).identity.hold_us == pytest.approx(150.0)


def test_a_replay_of_rows_timed_both_ways_answers_with_the_held_ones(tmp_path: Path) -> None:
    from results.store import write_table

    bf16 = DTYPES["bf16"]
    rows = [r for r in F.recording_rows([F.SMALL], ["bf16"]) if r["config_key"] == BASELINE.key]
    write_table([{**r, "time_ms": 0.5, "copy_ms": 1.0} for r in rows], tmp_path / "h200", "unheld")
    write_table(
        [{**r, "time_ms": 2.0, "copy_ms": 4.0, "hold_us": 150.0} for r in rows], tmp_path / "h200", "held"
    )
    runner = ReplayRunner.from_directory(tmp_path)
    assert runner.measure(F.SMALL, bf16, BASELINE).time_ms == 2.0
    assert runner.copy_time(F.SMALL, bf16) == 4.0 and runner.identity.hold_us == 150.0


def test_a_replay_answers_from_the_timing_that_recorded_the_most_configurations(tmp_path: Path) -> None:
    """An exhaustive recording timed without the hold beats a few configurations timed with
    it: a replay wants the fullest recording, and never mixes the two."""
    from results.store import write_table

    bf16 = DTYPES["bf16"]
    rows = F.recording_rows([F.SMALL], ["bf16"])
    baseline = [r for r in rows if r["config_key"] == BASELINE.key]
    write_table(rows, tmp_path / "h200", "grid")  # unheld (null), every configuration
    write_table([{**r, "time_ms": 9.0, "hold_us": 150.0} for r in baseline], tmp_path / "h200", "held")
    runner = ReplayRunner.from_directory(tmp_path)
    assert runner.measure(F.SMALL, bf16, BASELINE).time_ms == pytest.approx(baseline[0]["time_ms"])
    assert len(runner.recorded(F.SMALL, bf16)) == len(rows) and runner.identity.hold_us is None


def test_a_replay_answers_from_the_rows_of_its_l2_state(tmp_path: Path) -> None:
    from results.store import write_table

    bf16 = DTYPES["bf16"]
    rows = [r for r in F.recording_rows([F.SMALL], ["bf16"]) if r["config_key"] == BASELINE.key]
    write_table([{**r, "time_ms": 2.0} for r in rows], tmp_path / "h200", "cold")
    with pytest.raises(NoRecording, match="no rows of GPU 'h200' timed with L2 fed"):
        ReplayRunner.from_directory(tmp_path, l2="fed")
    write_table([{**r, "time_ms": 1.5, "l2": "fed"} for r in rows], tmp_path / "h200", "fed")
    cold, fed = ReplayRunner.from_directory(tmp_path), ReplayRunner.from_directory(tmp_path, l2="fed")
    assert cold.measure(F.SMALL, bf16, BASELINE).time_ms == 2.0 and cold.identity.l2 == "cold"
    assert fed.measure(F.SMALL, bf16, BASELINE).time_ms == 1.5 and fed.identity.l2 == "fed"


def test_the_bundled_recording_is_indexed_in_seconds() -> None:
    """Every configuration's answer is found at once: a pass per configuration took 30-50 s
    for the bundled recording's 9,000 configurations, before every replay and replay-eval."""
    import time

    from results.store import bundled_results_dir, load_results

    frame, _ = load_results(bundled_results_dir())
    started = time.monotonic()
    runner = ReplayRunner(frame, "h200")
    took = time.monotonic() - started
    assert sum(len(runner.recorded(s, DTYPES[d])) for s, d in runner.groups()) > 5000
    assert took < 10.0, f"indexing took {took:.1f} s"


def test_replay_bundled_names_the_measurements_shipped_with_the_package(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """From an install `results/data` is nowhere: `--replay bundled` is, and the help and the
    error for a directory without rows say where the bundled measurements live."""
    from results.store import bundled_results_dir
    from tuner.cli.main import main
    from tuner.cli.parser import build_parser

    bundled = bundled_results_dir()
    assert build_parser().parse_args(["tune", "--replay", "bundled"]).replay == bundled
    assert build_parser().parse_args(["tune", "--replay", "./bundled"]).replay.name == "bundled"
    assert main(["tune", "--help"]) == 0
    assert f"or bundled, the measurements shipped with the package (in {bundled})" in " ".join(
        capsys.readouterr().out.split()
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    for directory, says in (
        (empty, f"no trial rows under {empty}"),
        (tmp_path / "nowhere", "does not exist"),
    ):
        argv = ["--replay", str(directory), "--shape", SMALL_KEY, "--dtype", "bf16"]
        assert main([*argv, "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and says in err, err
        assert f"--replay bundled, the measurements shipped with the package (in {bundled})" in err
        assert err.count("(in ") == 1, err  # said '(in DIR)' again after the message naming DIR
    monkeypatch.chdir(tmp_path)  # anywhere: the bundled measurements are the package's
    argv = ["--replay", "bundled", "--gpu", "h200", "--shape", "B=8,T=1024,NH=32,NH_KV=8,HD=128"]
    assert main([*argv, "--dtype", "bf16", "--trials", "3", "--results", "out", "--no-progress"]) == 0
    assert " rows in out/h200/" in capsys.readouterr().err


def test_a_recording_of_other_ops_only_says_so(recording: Path) -> None:
    """Rows of repkv_backward alone, replayed for another op: it said 'the recording holds GPUs
    none; pick one with --gpu' (and with --gpu h200, 'holds no GPU 'h200'; it has none')."""
    for gpu in (None, "h200"):
        with pytest.raises(NoRecording) as info:
            ReplayRunner.from_directory(recording, gpu, op="repkv_forward")
        said = f"the recording holds no rows of repkv_forward, only of repkv_backward (in {recording})"
        assert str(info.value) == said
