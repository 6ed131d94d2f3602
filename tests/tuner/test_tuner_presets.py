from __future__ import annotations

import pytest

from tuner.cli.presets import DEFAULT_SHAPES, MODELS, UnknownModel, get_model, model_shapes
from variants import DTYPES


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
    assert {s.layout for s in shapes} == {(64, 8, 128), (32, 8, 128)}
    assert {(s.B, s.T) for s in shapes} == {(1, 1024), (1, 4096), (8, 1024), (8, 4096)}
