"""The offline judge of hold-out runs: the current rule's choices, timed by the latest run that
timed them, on a small synthetic store (no GPU)."""

from __future__ import annotations

import json
import math

import pandas as pd
from load_script import load_script
from trial_rows import GATHER, SPLIT16, VEC16, trial

import variants

HELD = variants.Shape(2, 1024, 40, 8, 128)  # the held-out layout: its rows are in the store too


def _store() -> pd.DataFrame:
    rows, number = [], 0
    for shape in (HELD, variants.Shape(8, 1024, 32, 8, 128), variants.Shape(4, 2048, 64, 8, 128)):
        for family, params, time in (
            ("split", SPLIT16, 0.10),
            ("vec", VEC16, 0.11),
            ("gather", GATHER, 0.13),
        ):
            slower = 0.5 if shape == HELD and family == "gather" else 0.0  # gather lost at HELD only
            rows.append(trial("g", shape, "bf16", family, params, time + slower, number=number))
            number += 1
    return pd.DataFrame(rows)


def _run(times: dict[str, float], tuned_ms: float = 0.1) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                **HELD.as_dict(),
                "dtype": "bf16",
                "op": "repkv_backward",
                "tuned": "x",
                "tuned_ms": tuned_ms,
                "explored": json.dumps(times),
            }
        ]
    )


def test_each_choice_is_judged_by_the_latest_run_that_timed_it() -> None:
    judge = load_script("scripts/judge_untuned.py")
    store = _store()
    probe = judge.timed_groups(_run({}), "probe")
    picks = judge.chosen(store, probe, "g")[("repkv_backward", HELD, "bf16")]
    assert set(picks) == {"best", "header", "race"} and picks["best"][0] in picks["race"]
    assert len(picks["race"]) >= 2
    # the layout was left out: /best is the neighbours' pick, not the store's own rows at HELD
    assert picks["best"][0].startswith("split")
    every = {key: 0.104 for key in {*picks["race"], *picks["header"]}}
    older = judge.timed_groups(_run({k: 0.2 for k in every}), "older")
    newer = judge.timed_groups(_run({picks["best"][0]: 0.102}), "newer")
    table = judge.judge(older + newer, judge.chosen(store, older + newer, "g")).set_index("choice")
    assert table.loc["best", "run"] == "newer" and math.isclose(table.loc["best", "ratio"], 1.02)
    assert table.loc["race", "run"] == "older" and math.isclose(table.loc["race", "ratio"], 2.0)
    # the bound needs the served configuration alone: the newer run's 1.02
    assert table.loc["race_bound", "run"] == "newer" and math.isclose(table.loc["race_bound", "ratio"], 1.02)
    summary = judge.summary(table.reset_index()).set_index("choice")
    assert summary.loc["best", "within"] == 1 and summary.loc["race", "within"] == 0
    # a choice no run timed is not judged
    untimed = judge.judge(newer, judge.chosen(store, newer, "g")).set_index("choice")
    assert not math.isnan(untimed.loc["race_bound", "ratio"])
    assert math.isnan(untimed.loc["race", "ratio"]) and pd.isna(untimed.loc["race", "run"])


def test_the_refining_step_is_judged_where_a_run_raced_the_current_shortlist() -> None:
    judge = load_script("scripts/judge_untuned.py")
    store = _store()
    picks = judge.chosen(store, judge.timed_groups(_run({}), "probe"), "g")[("repkv_backward", HELD, "bf16")]
    steps = json.dumps({picks["race"][-1]: 0.101, "x": 0.1})
    refined = _run({}).assign(raced=picks["race"][-1], refine_steps=steps)
    other = json.dumps({"split[block=1]": 0.09, "x": 0.1})
    elsewhere = _run({}).assign(raced="split[block=1]", refine_steps=other)  # not on the shortlist now
    plain = _run({picks["race"][0]: 0.105})  # no --refine: no refining judged

    def judged(*runs):
        groups = [g for number, run in enumerate(runs) for g in judge.timed_groups(run, f"run{number}")]
        return judge.judge(groups, judge.chosen(store, groups, "g")).set_index("choice").loc["race_refined"]

    row = judged(refined, elsewhere, plain)
    assert row["run"] == "run0" and math.isclose(row["ratio"], 1.01)
    assert math.isnan(judged(elsewhere, plain)["ratio"])


def test_a_refining_step_is_judged_as_the_ops_race_decides() -> None:
    """From the step's timings: the raced configuration stays unless a neighbour beats it by
    more than the race's margin; the tuned winner counts as a step where it is a neighbour."""
    judge = load_script("scripts/judge_untuned.py")
    raced, tuned = "vec[block=256,vec_bytes=16]", "split[block=64,items=2]"
    close, far = "vec[block=128,vec_bytes=16]", "vec[block=512,vec_bytes=16]"

    def ratio(steps: dict, tuned_key: str = tuned) -> float:
        row = {"raced": raced, "tuned": tuned_key, "refine_steps": json.dumps(steps)}
        return judge.refined_ratio(row)

    assert math.isclose(ratio({raced: 1.0, close: 0.995, tuned: 0.9}), 1.0 / 0.9)  # inside the margin
    assert math.isclose(ratio({raced: 1.0, close: 0.98, far: 0.97, tuned: 0.9}), 0.97 / 0.9)
    assert math.isclose(ratio({raced: 1.0, far: None, close: 0.95}, close), 1.0)  # tuned is a neighbour
    assert math.isclose(ratio({raced: 1.0, tuned: 0.5}), 2.0)  # the tuned winner of another family
    assert math.isnan(judge.refined_ratio({"raced": raced, "tuned": tuned}))
    assert judge.one_apart(close, raced) and not judge.one_apart(tuned, raced)


def test_the_runs_read_by_default_are_those_timed_on_the_gpu_named(tmp_path) -> None:
    judge = load_script("scripts/judge_untuned.py")
    for name in ("h100_untuned_holdout_a", "h100_untuned_holdout_b", "h200_untuned_holdout_a", "h100_chain"):
        (tmp_path / f"{name}.parquet").write_bytes(b"")
    found = [p.name for p in judge.recorded_runs("h100", tmp_path)]
    assert found == ["h100_untuned_holdout_a.parquet", "h100_untuned_holdout_b.parquet"]


def test_the_per_layout_table_gives_each_choices_worst_and_the_runs_copy_and_kernel1_ratios() -> None:
    judge = load_script("scripts/judge_untuned.py")
    store = _store()
    picks = judge.chosen(store, judge.timed_groups(_run({}), "probe"), "g")[("repkv_backward", HELD, "bf16")]
    slow = _run({picks["best"][0]: 0.11}).assign(copy_ms=0.125, kernel1_ms=0.4)
    fast = _run({picks["best"][0]: 0.101}).assign(B=4, copy_ms=0.1, kernel1_ms=0.3)
    groups = judge.timed_groups(slow, "a") + judge.timed_groups(fast, "b")
    table = judge.per_layout(judge.judge(groups, judge.chosen(store, groups, "g")), groups)
    (row,) = table.to_dict("records")
    assert row["layout"] == "40/8/128" and row["model"] == "qwen2.5-14b" and row["groups"] == 2
    assert math.isclose(row["best"], 1.1) and math.isnan(row["race_refined"])
    assert math.isclose(row["tuned_vs_copy_min"], 0.8) and math.isclose(row["tuned_vs_copy_max"], 1.0)
    assert math.isclose(row["kernel1_vs_tuned_min"], 3.0)
    text = judge.markdown(table)
    assert text.splitlines()[0].startswith("| op | layout | model | groups | best |")
    assert "| 1.100 |" in text and "| - |" in text
