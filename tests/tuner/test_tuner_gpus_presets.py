from __future__ import annotations

import pytest

from tuner.gpus import GpuLabelMismatch, InvalidGpuLabel, default_label, label_matches, resolve_label
from tuner.presets import DEFAULT_SHAPES, MODELS, UnknownModel, get_model, model_shapes
from variants import DTYPES


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


def test_default_shapes_are_modest_and_each_moves_30mb_to_1_5gb_in_bf16() -> None:
    assert 8 <= len(DEFAULT_SHAPES) <= 10
    assert len(set(DEFAULT_SHAPES)) == len(DEFAULT_SHAPES)
    for shape in DEFAULT_SHAPES:
        assert 30e6 <= shape.bytes_moved(DTYPES["bf16"]) <= 1.5e9, shape


def test_models_by_loose_name_and_the_batch_seq_grid() -> None:
    assert get_model("Llama-3 8B") is MODELS["llama3-8b"]
    assert get_model("gemma2-9b").HD == 256
    with pytest.raises(UnknownModel, match="expected one of"):
        get_model("gpt-5")
    shapes = model_shapes(["llama3-70b", "Mistral 7B"], (1, 8), (1024, 4096))
    assert len(shapes) == 8
    assert {(s.NH, s.NH_KV, s.HD) for s in shapes} == {(64, 8, 128), (32, 8, 128)}
    assert {(s.B, s.T) for s in shapes} == {(1, 1024), (1, 4096), (8, 1024), (8, 4096)}
