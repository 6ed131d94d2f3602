"""scripts/bench_chain.py's rows from synthetic measurements: ratios, targets, the table, the parquet."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from bench_chain_parts.plan import (  # noqa: E402
    COMPILED,
    COPY,
    FUSED,
    LLMC_BEST,
    LLMC_SEED,
    PAIRS,
    SEED,
    UNFUSED,
    compile_peer,
)

from variants import DTYPES, OPS, Shape, get_dtype  # noqa: E402


# --- rows, ratios, targets and the table ---
@dataclass(frozen=True)
class Timing:  # what the rows read of tuner's Timing
    median_ms: float
    p20_ms: float
    p80_ms: float
    reps: int


def timing(ms: float) -> Timing:
    return Timing(median_ms=ms, p20_ms=0.99 * ms, p80_ms=1.01 * ms, reps=100)


def synthetic_frame() -> pd.DataFrame:
    from bench_chain_parts.report import frame_of, make_row

    small = Shape(B=1, T=512, NH=32, NH_KV=8, HD=64)
    rows = []
    cases = [  # (pair, shape, dtype, copy, fused, llm.c k1@128, llm.c best, unfused, default, max-autotune)
        ("forward", SEED, "bf16", 0.080, 0.082, 0.700, 0.500, 0.150, 0.120, 0.110),  # every target met
        (
            "backward",
            SEED,
            "bf16",
            0.080,
            0.090,
            0.600,
            0.450,
            0.140,
            0.130,
            0.125,
        ),  # 0.64x unfused, 1.125x copy, 6.7x llm.c
        ("backward", SEED, "fp32", 0.150, 0.152, 0.900, 0.800, 0.300, 0.200, math.nan),  # max-autotune failed
        ("forward", small, "bf16", 0.006, 0.009, 0.030, 0.025, 0.016, 0.020, 0.019),  # under 32 MB
    ]
    for pair, shape, dtype, *times in cases:
        p, d = PAIRS[pair], get_dtype(dtype)
        peers = [
            (COPY, "ceiling"),
            (FUSED, "fused"),
            (LLMC_SEED, "llm.c"),
            (LLMC_BEST, "llm.c"),
            (UNFUSED, "unfused"),
            (compile_peer("default"), COMPILED),
            (compile_peer("max-autotune-no-cudagraphs"), COMPILED),
        ]
        for (peer, kind), ms in zip(peers, times, strict=True):
            if math.isnan(ms):
                rows.append(make_row(p, shape, d, peer, kind, status="compile_error", message="boom"))
            else:
                rows.append(make_row(p, shape, d, peer, kind, timing=timing(ms), config=f"cfg-{peer}"))
        rows.append(make_row(p, shape, d, "llm.c rope@256", "sweep", timing=timing(0.3)))
    for row in rows:
        row.update(run_id="20270101T000000-host-1", gpu_name="NVIDIA H200")
    return frame_of(rows)


def test_rows_carry_the_ratios_to_the_copy_and_the_fused_op() -> None:
    from bench_chain_parts.report import ROW_COLUMNS

    frame = synthetic_frame()
    assert list(frame.columns) == list(ROW_COLUMNS)
    fwd = frame[(frame["pair"] == "forward") & (frame["shape"] == SEED.key)].set_index("peer")
    assert fwd.loc[FUSED, "ratio_to_copy"] == pytest.approx(0.082 / 0.080)
    assert fwd.loc[LLMC_SEED, "ratio_to_fused"] == pytest.approx(0.700 / 0.082)
    assert fwd.loc[COPY, "ratio_to_copy"] == pytest.approx(1.0) and fwd.loc[FUSED, "ratio_to_fused"] == 1.0
    assert fwd.loc[FUSED, "MB"] == pytest.approx(
        OPS["rope_repkv_forward"].bytes_moved(SEED, DTYPES["bf16"]) / 1e6
    )
    assert fwd.loc[FUSED, "fused_op"] == "rope_repkv_forward" and fwd.loc[FUSED, "nrep"] == 4
    failed = frame[frame["status"] == "compile_error"].iloc[0]
    assert math.isnan(failed["time_ms"]) and math.isnan(failed["ratio_to_fused"]) and failed["reps"] == 0
    assert set(frame["run_id"]) == {"20270101T000000-host-1"} and set(frame["gpu_name"]) == {"NVIDIA H200"}


def test_summary_takes_the_fastest_compile_mode_and_judges_the_targets() -> None:
    from bench_chain_parts.report import summary

    lines = summary(synthetic_frame()).set_index(["pair", "shape", "dtype"])
    fwd = lines.loc[("forward", SEED.key, "bf16")]
    assert fwd["compile_mode"] == compile_peer("max-autotune-no-cudagraphs")
    assert fwd["compile_x_fused"] == pytest.approx(0.110 / 0.082)
    assert fwd["unfused_x_fused"] == pytest.approx(0.150 / 0.082)
    assert fwd["target_unfused"] == f"met {0.082 / 0.150:.2f}x"
    assert fwd["target_llmc"] == f"met {0.700 / 0.082:.2f}x"
    assert fwd["target_copy"] == f"met {0.082 / 0.080:.2f}x"
    bwd = lines.loc[("backward", SEED.key, "bf16")]
    assert bwd["target_unfused"] == f"UNMET {0.090 / 0.140:.2f}x"
    assert bwd["target_llmc"] == f"UNMET {0.600 / 0.090:.2f}x"
    assert bwd["target_copy"] == f"UNMET {0.090 / 0.080:.2f}x"
    fp32 = lines.loc[("backward", SEED.key, "fp32")]
    assert fp32["compile_mode"] == compile_peer("default")  # the other mode failed
    assert fp32["target_llmc"] == "n/a" and fp32["target_unfused"].startswith("met")
    small = lines.loc[("forward", "B=1,T=512,NH=32,NH_KV=8,HD=64", "bf16")]
    assert small["MB"] < 32 and small["target_copy"] == "n/a" and small["target_llmc"] == "n/a"
    assert small["target_unfused"] == f"met {0.009 / 0.016:.2f}x"


def test_a_missing_fused_time_is_not_measured_not_met() -> None:
    from bench_chain_parts.report import summary

    frame = synthetic_frame()
    frame.loc[frame["peer"] == FUSED, "status"] = "wrong_result"
    line = summary(frame).iloc[0]
    assert line["target_unfused"] == line["target_llmc"] == line["target_copy"] == "not measured"


def test_the_table_lists_every_case_the_targets_and_the_failures() -> None:
    from bench_chain_parts.report import render

    text = render(synthetic_frame())
    assert "run `20270101T000000-host-1` on NVIDIA H200" in text
    table = [
        line for line in text.splitlines() if line.startswith("| forward") or line.startswith("| backward")
    ]
    assert len(table) == 2 * 4  # the times, then the configurations
    assert "fused <= 0.6x best unfused (nrep 4)" in text and "fused >= 8x llm.c k1@128 (bf16, seed)" in text
    assert "| 8.54x |" in text  # llm.c k1@128 over the fused op, forward bf16 at the seed
    assert "Targets: 6 met, 3 unmet, 0 not measured." in text
    assert "backward B=8,T=1024,NH=32,NH_KV=8,HD=128 fp32 torch.compile[max-autotune-no-cudagraphs]: " in text
    assert "compile_error: boom" in text


def test_the_parquet_round_trips(tmp_path: Path) -> None:
    from results.writing import write_frame

    frame = synthetic_frame()
    write_frame(frame, tmp_path / "h200_chain.parquet")
    back = pd.read_parquet(tmp_path / "h200_chain.parquet")
    assert len(back) == len(frame) and back["ratio_to_fused"].equals(frame["ratio_to_fused"])
