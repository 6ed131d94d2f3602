from __future__ import annotations

import io
import json
import math

import pandas as pd
import pytest

from tuner.cli.report import WINNER_COLUMNS, exclusion_groups, write_winners


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


def test_winners_give_the_fraction_of_the_peak_where_the_device_is_known() -> None:
    from trial_rows import S1, VEC16, trial

    from tuner.cli.report import render_winners, winners_table
    from variants import get_dtype

    rows = [
        trial("h200", S1, "bf16", "vec", VEC16, 0.1, gpu_name="NVIDIA H200", empty_launch_ms=0.004),
        trial("h100", S1, "bf16", "vec", VEC16, 0.1),  # SYNTHETIC H100: no peak known
    ]
    table = winners_table(pd.DataFrame(rows)).set_index("gpu")
    bytes_moved = S1.bytes_moved(get_dtype("bf16"))
    assert table.loc["h200", "frac_peak"] == pytest.approx(bytes_moved / 0.1e-3 / 1e9 / 4800)
    assert pd.isna(table.loc["h100", "frac_peak"])
    assert table.loc["h200", "ratio_to_empty_launch"] == pytest.approx(25.0)
    assert pd.isna(table.loc["h100", "ratio_to_empty_launch"])
    out = io.StringIO()
    render_winners(table.reset_index(), out)
    assert (
        "% peak" in out.getvalue()
        and "25.00x" in out.getvalue()
        and f"{100 * table.loc['h200', 'frac_peak']:.1f}%" in out.getvalue()
    )


def test_winners_written_to_a_pipe_or_a_file_keep_every_configuration_name_whole() -> None:
    from tuner.cli.report import render_winners

    config = "tile[" + ",".join(f"parameter_{i}=value_{i}" for i in range(12)) + "]"  # 250 characters
    row = {c: math.nan for c in WINNER_COLUMNS}
    row.update(gpu="h200", shape="B=8,T=1024,NH=32,NH_KV=8,HD=128", dtype="bf16", config=config, time_ms=0.1)
    out = io.StringIO()  # not a terminal
    render_winners(pd.DataFrame([row]), out, title="Winners")
    text = out.getvalue()
    assert "…" not in text and config in text  # whole, on one line: a pipe to grep finds it


def test_variants_lines_up_each_familys_parameter_columns() -> None:
    # bulk's blocks_per_sm (13 letters) pushed its choices one column past the others'
    from tuner.cli.report import render_variants
    from variants import Shape

    out = io.StringIO()
    render_variants([Shape(8, 1024, 32, 8, 128)], ["bf16"], file=out)
    lines = out.getvalue().splitlines()
    start = lines.index(next(line for line in lines if line.startswith("bulk:")))
    params = [line for line in lines[start + 1 :] if not line.lstrip().startswith("valid of")][:5]
    assert params[3].startswith("  blocks_per_sm 1, 2, 4, 8, 0"), params
    assert len({line.index(line.split()[1]) for line in params}) == 1, params
