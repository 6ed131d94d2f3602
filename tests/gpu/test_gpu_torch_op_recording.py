"""The PyTorch operator on a GPU: an untuned shape's race, recorded as rows and served by the next process."""

from __future__ import annotations

from pathlib import Path

import pytest
from torch_op_helpers import TOLERANCE

torch = pytest.importorskip("torch")

from repkv_tune import launcher as op_launcher  # noqa: E402
from repkv_tune import ops as torch_op  # noqa: E402
from repkv_tune import race as op_race  # noqa: E402
from repkv_tune import race_bench  # noqa: E402
from repkv_tune.ops import reference_backward, repkv_backward, served  # noqa: E402
from results.schema import COPY_FASTEST  # noqa: E402
from results.store import load_results  # noqa: E402
from tuner.run.gpus import default_label  # noqa: E402
from tuner.runners.race import RACE_MARGIN  # noqa: E402

pytestmark = pytest.mark.gpu


UNTUNED = (3, 1000, 32, 8, 128)  # no bundled result has this B*T: its first call races


@pytest.fixture
def recording(monkeypatch, tmp_path: Path) -> Path:
    """Races record under tmp_path/rows for this test only; launchers chosen afresh from the
    bundled results alone (an empty user directory), so the untuned shape races again."""
    monkeypatch.setattr(op_race, "_RECORD", None)
    monkeypatch.setattr(op_launcher, "LAUNCHERS", op_launcher.Launchers(tmp_path / "no-user-results"))
    monkeypatch.setattr(torch_op, "_PLANS", {})
    torch_op.record_races(directory=tmp_path / "rows")
    return tmp_path / "rows"


def test_a_recorded_race_writes_the_measurements_as_rows_of_its_own_run(recording: Path) -> None:
    key, how, race = served(UNTUNED, torch.bfloat16)
    assert how == "raced" and len(race) >= 2
    frame, report = load_results(recording)
    assert not report.dropped and not report.skipped
    gpu = default_label(torch.cuda.get_device_name(0))
    ok = frame[frame["status"] == "ok"]
    assert sorted(ok["config_key"]) == sorted(k for k, _ in race)
    assert set(frame["gpu"]) == {gpu} and set(frame["dtype"]) == {"bf16"}
    assert frame["run_id"].str.startswith(f"race-{gpu}-").all() and frame["run_id"].nunique() == 1
    assert set(map(tuple, frame[["B", "T", "NH", "NH_KV", "HD"]].to_numpy().tolist())) == {UNTUNED}
    assert (ok["copy_ms"] > 0).all() and (ok["ratio_to_copy"] > 0).all()
    assert (ok["reps"] == race_bench.RACE_REPS * op_race.RACE_ROUNDS).all()
    # timed as the tuner times: ranked with its rows
    assert (frame["hold_us"] == race_bench.RACE_HOLD_US).all()
    assert (frame["copy_method"] == COPY_FASTEST).all()  # and held to the tuner's copy
    medians = dict(zip(ok["config_key"], ok["time_ms"], strict=True))
    assert medians[key] <= min(medians.values()) * (1 + RACE_MARGIN) + 1e-12
    assert dict(race) == pytest.approx(medians)


def test_a_recorded_shape_is_served_exactly_by_the_next_process(recording: Path) -> None:
    _, how, race = served(UNTUNED, torch.bfloat16)
    assert how == "raced"
    fresh = op_launcher.Launchers(recording)
    launcher = fresh.get((UNTUNED, "bf16", 0))
    # the index serves the fastest recorded median (the race's margin no longer applies)
    fastest = min(race, key=lambda entry: entry[1])[0]
    assert (launcher.served_from, launcher.race, launcher.config_key) == ("exact", (), fastest)


def untuned_dout(dtype: torch.dtype) -> torch.Tensor:
    B, T, NH, _, HD = UNTUNED
    return torch.randn(B, T, 3, NH, HD, device="cuda", dtype=dtype)


def assert_backward(dinp: torch.Tensor, dout: torch.Tensor) -> None:
    torch.cuda.synchronize()
    atol, rtol = TOLERANCE[dout.dtype]
    torch.testing.assert_close(
        dinp.double(), reference_backward(dout.double(), UNTUNED[3]), atol=atol, rtol=rtol
    )


def test_recording_through_the_environment(monkeypatch, recording: Path, tmp_path: Path) -> None:
    monkeypatch.setattr(op_race, "_RECORD", None)
    monkeypatch.setenv("REPKV_RECORD", "1")
    monkeypatch.setenv("REPKV_RESULTS_DIR", str(tmp_path / "user"))
    dout = untuned_dout(torch.float16)
    assert_backward(repkv_backward(dout, UNTUNED[3]), dout)
    frame, _ = load_results(tmp_path / "user")
    assert len(frame) >= 2 and set(frame["dtype"]) == {"fp16"}


def test_a_recording_that_cannot_be_written_leaves_the_call_working(recording: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    torch_op.record_races(directory=blocker / "rows")
    dout = untuned_dout(torch.float32)
    assert_backward(repkv_backward(dout, UNTUNED[3]), dout)
    assert served(UNTUNED, torch.float32)[1] == "raced"
