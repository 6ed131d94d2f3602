from __future__ import annotations

import io
import json
import math

import pandas as pd

from tuner.report import WINNER_COLUMNS, exclusion_groups, write_winners


def test_numbers_do_not_split_a_reason_and_shared_ones_are_kept() -> None:
    reasons = [
        "HD=250 is not divisible by the vector width 4 (8 bytes of bf16)",
        "HD=250 is not divisible by the vector width 8 (16 bytes of bf16)",
        "HD=250 is not divisible by the vector width 8 (16 bytes of bf16)",
        "a 4-byte vector is narrower than one fp32 element",
        "dout has 3221225472 elements; llm.c's int indices stop at 2^31",
    ]
    assert exclusion_groups(reasons) == [
        (3, "HD=250 is not divisible by the vector width N (N bytes of bf16)"),
        (1, "a 4-byte vector is narrower than one fp32 element"),
        (1, "dout has 3221225472 elements; llm.c's int indices stop at 2^31"),
    ]
    assert exclusion_groups([]) == []


def test_winners_as_json_and_csv() -> None:
    row = {c: "x" for c in WINNER_COLUMNS} | {"time_ms": 0.5, "gbps": math.nan, "ratio_to_copy": math.inf}
    table = pd.DataFrame([row], columns=list(WINNER_COLUMNS))
    out = io.StringIO()
    write_winners(table, "json", out)
    (record,) = json.loads(out.getvalue())  # strict JSON: NaN and inf are null
    assert record["time_ms"] == 0.5 and record["gbps"] is None and record["ratio_to_copy"] is None
    out = io.StringIO()
    write_winners(table, "csv", out)
    assert out.getvalue().splitlines()[0] == ",".join(WINNER_COLUMNS)
