"""repkv_tune.race without a GPU: a race on fake timings keeps the fastest, records validated
rows that the store reads back, never breaks the call when it cannot write, and records only
where the user allows it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")


class FakeBench:
    """Times from a table (config key -> samples); `check` fails as told; a fixed copy time;
    an op (default repkv backward) at one bf16 shape on device 0."""

    def __init__(
        self,
        times: dict,
        wrong: tuple[str, ...] = (),
        uncheckable: tuple[str, ...] = (),
        op: str | None = None,
    ):
        from variants import DTYPES, Shape, get_op

        self.times, self.wrong, self.uncheckable = times, wrong, uncheckable
        self.checked: list[str] = []
        self.op, self.shape, self.dtype, self.device = (
            get_op(op),
            Shape(3, 1000, 32, 8, 128),
            DTYPES["bf16"],
            0,
        )

    def time(self, launcher) -> list[float]:
        return self.times[launcher.config_key]

    def check(self, launcher) -> None:
        from tuner.runners.race_record import WrongResult

        self.checked.append(launcher.config_key)
        if launcher.config_key in self.wrong:
            raise WrongResult("3 of 96 elements wrong")
        if launcher.config_key in self.uncheckable:
            raise MemoryError("out of memory")

    def copy_ms(self) -> float:
        return 0.03


def _fake_launchers(op: str | None = None):
    from repkv_tune.launcher import Launcher as _Launcher
    from results.selection import generic_configs
    from variants import DTYPES, get_op

    return [
        _Launcher(
            function=0,
            grid=1,
            block=1,
            config_key=c.key,
            config=c,
            served_from="nearest",
            _keep=(),
            op=get_op(op).name,
        )
        for c in generic_configs(DTYPES["bf16"], get_op(op))
    ]


def _race_on(bench, launchers, recorder):
    from repkv_tune.race import _race_on

    return _race_on(bench, launchers, "h200", recorder)


@pytest.fixture
def known_device(monkeypatch):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tuner"))
    import tuner_fakes as F

    from repkv_tune import race as op_race

    monkeypatch.setattr(op_race, "_IDENTITIES", {0: F.IDENTITY})


def test_the_race_keeps_the_fastest_and_says_so_without_recording() -> None:
    launchers = _fake_launchers()
    times = {lch.config_key: [0.05] for lch in launchers}
    times[launchers[2].config_key] = [0.03]
    bench = FakeBench(times)
    winner = _race_on(bench, launchers, None)
    assert winner is launchers[2] and winner.served_from == "raced"
    assert [key for key, _ in winner.race] == [lch.config_key for lch in launchers]
    assert not bench.checked  # validation is the recording's, not the race's


def _refine_on(bench, winner, refine):
    from repkv_tune.race import _refined

    return _refined(winner, refine, lambda candidates: _race_on(bench, candidates, None))


def test_a_refining_race_serves_a_faster_neighbour_and_keeps_both_races_timings() -> None:
    launchers = _fake_launchers()
    keys = [lch.config_key for lch in launchers]
    times = {key: [0.05] for key in keys}
    times[keys[0]] = [0.04]
    bench = FakeBench(times)
    winner = _race_on(bench, launchers[:2], None)
    assert winner is launchers[0]
    asked = []

    def neighbours(launcher):
        asked.append(launcher.config_key)
        return launchers[2:]

    # no neighbour beats the winner by the race's margin: it stays, served as raced
    times[keys[3]] = [0.0398]
    assert _refine_on(bench, winner, neighbours) is winner and winner.served_from == "raced"
    assert asked == [keys[0]]
    assert [key for key, _ in winner.race] == [keys[0], keys[1], *keys[2:]]

    times[keys[3]] = [0.03]
    winner = _race_on(bench, launchers[:2], None)
    refined = _refine_on(bench, winner, neighbours)
    assert refined is launchers[3] and refined.served_from == "refined"
    assert dict(refined.race)[keys[1]] == 0.05 and dict(refined.race)[keys[3]] == 0.03


def test_a_race_without_refining_or_neighbours_keeps_its_winner() -> None:
    launchers = _fake_launchers()
    bench = FakeBench({lch.config_key: [0.05] for lch in launchers})
    winner = _race_on(bench, launchers, None)
    race = winner.race
    assert _refine_on(bench, winner, None) is winner and winner.race == race
    assert _refine_on(bench, winner, lambda launcher: []) is winner and winner.race == race
    assert _refine_on(bench, winner, lambda launcher: [launcher]) is winner and winner.race == race
    # neighbours the first race already timed are not raced again
    assert _refine_on(bench, winner, lambda launcher: launchers) is winner and winner.race == race


def test_a_refining_race_times_each_configuration_once() -> None:
    launchers = _fake_launchers()
    keys = [lch.config_key for lch in launchers]
    bench = FakeBench({key: [0.05] for key in keys})
    winner = _race_on(bench, launchers[:2], None)
    refined = _refine_on(bench, winner, lambda launcher: launchers[1:])  # launchers[1] raced already
    assert [key for key, _ in refined.race] == keys


def test_a_recorded_race_writes_validated_rows_the_store_reads_back(tmp_path, known_device) -> None:
    from results.store import load_results
    from tuner.runners.race_record import RaceRecorder

    launchers = _fake_launchers()
    keys = [lch.config_key for lch in launchers]
    times = {keys[0]: [0.05] * 7, keys[1]: [0.04] * 7, keys[2]: [0.02] * 7, keys[3]: [0.06] * 7}
    bench = FakeBench(times, wrong=(keys[2],), uncheckable=(keys[3],))
    winner = _race_on(bench, launchers, RaceRecorder(tmp_path))
    assert winner is launchers[1]  # the wrong one was faster and skipped
    assert bench.checked == keys
    frame, report = load_results(tmp_path)
    assert not report.dropped and not report.skipped
    statuses = dict(zip(frame["config_key"], frame["status"], strict=True))
    # the one whose check could not run raced but is not recorded: a row claims a validated output
    assert statuses == {keys[0]: "ok", keys[1]: "ok", keys[2]: "wrong_result"}
    assert set(frame["copy_ms"]) == {0.03} and frame["run_id"].str.startswith("race-h200-").all()
    assert set(frame["gpu"]) == {"h200"} and set(frame["dtype"]) == {"bf16"}


def test_a_recorded_race_of_another_op_writes_that_ops_rows(tmp_path, known_device) -> None:
    # the fused backward shares family names (warp_sum, split) with repkv backward: its rows
    # must name it, and its bytes (freqs_cis read too) set their bandwidth
    from results.store import load_results
    from tuner.runners.race_record import RaceRecorder
    from variants import get_op

    op = "repkv_rope_backward"
    launchers = _fake_launchers(op)
    keys = [lch.config_key for lch in launchers]
    bench = FakeBench({key: [0.05 + 0.01 * i] * 7 for i, key in enumerate(keys)}, op=op)
    assert _race_on(bench, launchers, RaceRecorder(tmp_path)) is launchers[0]
    frame, report = load_results(tmp_path)
    assert not report.dropped and not report.skipped
    assert set(frame["op"]) == {op} and list(frame["config_key"]) == keys
    moved = get_op(op).bytes_moved(bench.shape, bench.dtype)
    assert frame["gbps"].iloc[0] == pytest.approx(moved / 0.05e-3 / 1e9)


def test_a_recording_that_cannot_write_does_not_break_the_call(tmp_path, known_device) -> None:
    from tuner.runners.race_record import RaceRecorder

    blocker = tmp_path / "file"
    blocker.write_text("")
    launchers = _fake_launchers()
    bench = FakeBench({lch.config_key: [0.05] for lch in launchers})
    assert _race_on(bench, launchers, RaceRecorder(blocker)) is launchers[0]


@pytest.mark.parametrize("value", ["false", "False", "off", "no", " 0 "])
def test_recording_and_racing_are_off_for_false_off_and_no(tmp_path, monkeypatch, value: str) -> None:
    # REPKV_RECORD=false recorded, and REPKV_RACE=false raced: only "0" and "" were off
    from repkv_tune import race as op_race

    monkeypatch.setattr(op_race, "_RECORD", None)
    monkeypatch.setenv("REPKV_RESULTS_DIR", str(tmp_path / "mine"))
    monkeypatch.setenv("REPKV_RECORD", value)
    assert op_race._recording_directory() is None
    monkeypatch.setenv("REPKV_RACE", value)
    assert not op_race.switched_on("REPKV_RACE", "1")
    monkeypatch.setenv("REPKV_RECORD", "yes")
    assert op_race._recording_directory() == tmp_path / "mine"


def test_recording_is_off_by_default_and_switched_by_env_or_call(tmp_path, monkeypatch) -> None:
    from repkv_tune import ops as torch_op
    from repkv_tune import race as op_race

    monkeypatch.setattr(op_race, "_RECORD", None)
    monkeypatch.delenv("REPKV_RECORD", raising=False)
    assert op_race._recording_directory() is None and op_race._recorder() is None
    monkeypatch.setenv("REPKV_RECORD", "1")
    monkeypatch.setenv("REPKV_RESULTS_DIR", str(tmp_path / "mine"))
    assert op_race._recording_directory() == tmp_path / "mine"
    assert op_race._recorder().directory == tmp_path / "mine"
    torch_op.record_races(False)
    assert op_race._recording_directory() is None
    torch_op.record_races(directory=tmp_path / "there")
    assert op_race._recording_directory() == tmp_path / "there"
    monkeypatch.setenv("REPKV_RECORD", "0")
    assert op_race._recording_directory() == tmp_path / "there"  # the call overrides the env
    # a directory given in enabled's place recorded under the user results directory instead
    with pytest.raises(
        TypeError, match=r"enabled must be True or False, got '.*elsewhere'; a directory goes as"
    ):
        torch_op.record_races(str(tmp_path / "elsewhere"))
    assert op_race._recording_directory() == tmp_path / "there"  # left as it was
