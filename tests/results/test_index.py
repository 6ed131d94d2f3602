from __future__ import annotations

import json

import pandas as pd
from trial_rows import S1, VEC16, h100_rows, trial

from results.index import build_index, parse_config
from results.store import empty_frame


def test_candidates_are_ok_rows_fastest_first_one_per_config() -> None:
    rows = [*h100_rows(), trial("h100", S1, "bf16", "vec", VEC16, 0.12, number=9)]
    index = build_index(pd.DataFrame(rows))
    group = index.groups[("h100", (8, 1024, 32, 8, 128), "bf16")]
    assert [c.family.name for c in group.candidates] == ["split", "vec", "naive"]
    assert group.time_of(group.candidates[1].config_key) == 0.10  # the faster of the two vec trials
    assert group.baseline_ms == 0.70 and group.trials == 6


def test_unknown_families_and_bad_params_are_counted_not_served() -> None:
    rows = [
        trial("h100", S1, "bf16", "vec", VEC16, 0.1),
        {**trial("h100", S1, "bf16", "vec", VEC16, 0.01), "family": "retired", "config_key": "retired[]"},
        {
            **trial("h100", S1, "bf16", "vec", VEC16, 0.02),
            "params": json.dumps({"block": 3}),
            "config_key": "x",
        },
        {**trial("h100", S1, "bf16", "vec", VEC16, 0.03), "params": "not json", "config_key": "y"},
    ]
    index = build_index(pd.DataFrame(rows))
    group = index.groups[("h100", (8, 1024, 32, 8, 128), "bf16")]
    assert len(group.candidates) == 1 and index.unusable_rows == 3


def test_parse_config() -> None:
    family, config, params = parse_config("naive", '{"block": 128}')
    assert family.name == "naive" and config.key == "naive[block=128]" and params == {"block": 128}
    assert parse_config("naive", "[1, 2]") is None


def test_empty_store() -> None:
    index = build_index(empty_frame())
    assert index.groups == {} and index.gpus == {} and index.available_gpus() == []
