from __future__ import annotations

from pathlib import Path

import pytest
import tuner_fakes as F

from results.store import write_table
from tuner.cli.main import main
from tuner.run.gpus import GpuLabelMismatch, InvalidGpuLabel, default_label, label_matches, resolve_label


@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("NVIDIA H200", "h200"),
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA A100-SXM4-80GB", "a100"),
        ("Tesla V100-SXM2-16GB", "v100"),
        ("NVIDIA GeForce RTX 4090", "rtx4090"),
        ("NVIDIA RTX A6000", "rtxa6000"),
        ("NVIDIA L40S", "l40s"),
    ],
)
def test_default_label(name: str, label: str) -> None:
    assert default_label(name) == label


def test_a_label_that_names_another_gpu_is_refused_with_the_device_named() -> None:
    with pytest.raises(GpuLabelMismatch, match="NVIDIA H200"):
        resolve_label("h100", "NVIDIA H200")
    assert not label_matches("h20", "NVIDIA H200")
    assert not label_matches("h2000", "NVIDIA H200")


def test_matching_refined_forced_and_derived_labels() -> None:
    assert resolve_label("h200", "NVIDIA H200") == "h200"
    assert resolve_label("h100-pcie", "NVIDIA H100 PCIe") == "h100-pcie"
    assert resolve_label("rtx-4090", "NVIDIA GeForce RTX 4090") == "rtx-4090"
    assert resolve_label("h100", "NVIDIA H200", force=True) == "h100"
    assert resolve_label(None, "NVIDIA H200") == "h200"
    with pytest.raises(InvalidGpuLabel):
        resolve_label("../h200", "NVIDIA H200", force=True)


def test_gpu_label_from_recording_cannot_escape_results_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A recording whose rows name the GPU "../../x", replayed under that label: one clear
    line, and nothing written, least of all outside the results directory (t/a/x)."""
    monkeypatch.chdir(tmp_path)
    write_table(F.recording_rows([F.SMALL], ["bf16"], gpu="../../x"), Path("rec"), "hostile")
    replay = ["--replay", "rec", "--shape", str(F.SMALL), "--dtype", "bf16", "--trials", "3", "--no-progress"]
    assert main([*replay, "--gpu", "../../x", "--results", "t/a/b/out", "--storage", "memory"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "GPU label '../../x' must be" in err
    assert main([*replay, "--results", "t/a/b/out", "--storage", "memory"]) == 2  # the label from the rows
    assert "no trial rows under rec" in capsys.readouterr().err
    assert not Path("t").exists()
