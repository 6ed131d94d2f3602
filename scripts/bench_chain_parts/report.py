"""The chain benchmark's rows and tables (pandas, no GPU): one row per (pair, shape, dtype,
peer), the ratios `derive` adds (to the same-run copy of the fused op's bytes and to the fused
op), one summary line per (pair, shape, dtype) with the issue's targets, and the markdown."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from variants import DType, Shape

from .plan import COMPILED, COPY, FUSED, LLMC_BEST, LLMC_SEED, SEED, STATUS_OK, UNFUSED, Pair

ROW_COLUMNS = (
    "pair",
    "fused_op",
    "chain",
    "shape",
    "B",
    "T",
    "NH",
    "NH_KV",
    "HD",
    "nrep",
    "dtype",
    "MB",
    "peer",
    "kind",
    "config",
    "status",
    "message",
    "time_ms",
    "p20_ms",
    "p80_ms",
    "reps",
    "round_ms",
    "compile_s",
    "ratio_to_copy",
    "ratio_to_fused",
    "run_id",
    "gpu_name",
)
CASE = ["pair", "shape", "dtype"]


def fmt(value: Any, spec: str = "") -> str:
    """A cell: '' for None or NaN, a number in `spec`, else the text."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return format(value, spec) if spec and isinstance(value, (int, float)) else str(value)


def markdown(frame: pd.DataFrame, columns: dict[str, tuple[str, str]]) -> str:
    """A markdown table of `frame`: columns maps a column to (header, format spec: '' for text,
    'x' for a ratio drawn as 1.23x, else a number format)."""
    lines = [
        "| " + " | ".join(header for header, _ in columns.values()) + " |",
        "|" + "|".join("---" if spec == "" else "--:" for _, spec in columns.values()) + "|",
    ]
    for _, row in frame.iterrows():
        cells = []
        for name, (_, spec) in columns.items():
            text = fmt(row.get(name), ".2f" if spec == "x" else spec)
            cells.append(text + "x" if spec == "x" and text else text)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def make_row(
    pair: Pair,
    shape: Shape,
    dtype: DType,
    peer: str,
    kind: str,
    status: str = STATUS_OK,
    message: str = "",
    timing: Any = None,
    config: str = "",
    round_ms: tuple[float, ...] = (),
    compile_s: float = math.nan,
    run_id: str = "",
    gpu_name: str = "",
) -> dict[str, Any]:
    """One row; `timing` (a tuner.timing_stats.Timing, its fastest round) only where ok. MB: the
    fused op's bytes moved (every input read once, the output written once)."""
    ok = status == STATUS_OK and timing is not None
    nan = math.nan
    return {
        "pair": pair.name,
        "fused_op": pair.fused,
        "chain": pair.chain,
        "shape": shape.key,
        **shape.as_dict(),
        "nrep": shape.nrep,
        "dtype": dtype.name,
        "MB": pair.op.bytes_moved(shape, dtype) / 1e6,
        "peer": peer,
        "kind": kind,
        "config": config,
        "status": status,
        "message": message,
        "time_ms": float(timing.median_ms) if ok else nan,
        "p20_ms": float(timing.p20_ms) if ok else nan,
        "p80_ms": float(timing.p80_ms) if ok else nan,
        "reps": int(timing.reps) if ok else 0,
        "round_ms": ", ".join(f"{ms:.4f}" for ms in round_ms),
        "compile_s": float(compile_s),
        "ratio_to_copy": nan,
        "ratio_to_fused": nan,
        "run_id": run_id,
        "gpu_name": gpu_name,
    }


def frame_of(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return derive(pd.DataFrame(rows, columns=list(ROW_COLUMNS)))


def derive(frame: pd.DataFrame) -> pd.DataFrame:
    """ratio_to_copy and ratio_to_fused of every row: its time over the same (pair, shape,
    dtype)'s copy and fused op (NaN where either did not measure ok)."""
    frame = frame.copy()

    def reference(peer: str) -> Any:
        ok = frame[(frame["peer"] == peer) & (frame["status"] == STATUS_OK)][[*CASE, "time_ms"]]
        ok = ok.drop_duplicates(CASE).rename(columns={"time_ms": "_ref"})
        return frame[CASE].merge(ok, on=CASE, how="left")["_ref"].to_numpy(dtype=float)

    time_ms = frame["time_ms"].astype(float).to_numpy()
    frame["ratio_to_copy"] = time_ms / reference(COPY)
    frame["ratio_to_fused"] = time_ms / reference(FUSED)
    return frame


@dataclass(frozen=True)
class Target:
    """One of the issue's targets: where it applies, the quantity and the bound."""

    column: str
    header: str
    applies: Callable[[pd.Series], bool]
    value: Callable[[pd.Series], float]
    met: Callable[[float], bool]


TARGETS = (
    Target(
        "target_unfused",
        "fused <= 0.6x best unfused (nrep 4)",
        lambda r: int(r["nrep"]) == 4,
        lambda r: r["fused_ms"] / r["unfused_ms"],
        lambda v: v <= 0.6,
    ),
    Target(
        "target_llmc",
        "fused >= 8x llm.c k1@128 (bf16, seed)",
        lambda r: r["dtype"] == "bf16" and r["shape"] == SEED.key,
        lambda r: r["llmc_seed_ms"] / r["fused_ms"],
        lambda v: v >= 8.0,
    ),
    Target(
        "target_copy",
        "fused <= 1.03x copy (>= 32 MB)",
        lambda r: float(r["MB"]) >= 32.0,
        lambda r: r["fused_ms"] / r["copy_ms"],
        lambda v: v <= 1.03,
    ),
)


def verdict(target: Target, row: pd.Series) -> str:
    """'met 0.52x', 'UNMET 0.71x', 'n/a' (the target does not apply) or 'not measured'."""
    if not target.applies(row):
        return "n/a"
    value = target.value(row)
    if not isinstance(value, float) or math.isnan(value):
        return "not measured"
    return f"{'met' if target.met(value) else 'UNMET'} {value:.2f}x"


def _time(group: pd.DataFrame, peer: str) -> tuple[float, str]:
    found = group[(group["peer"] == peer) & (group["status"] == STATUS_OK)]
    if found.empty:
        return math.nan, ""
    return float(found["time_ms"].iloc[0]), str(found["config"].iloc[0])


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    """One line per (pair, shape, dtype), in the rows' order: each peer's time, its ratio to the
    fused op, the fastest compile mode as the torch.compile peer, and the targets' verdicts."""
    lines = []
    for (pair, shape, dtype), group in frame.groupby(CASE, sort=False):
        first = group.iloc[0]
        line: dict[str, Any] = {
            "pair": pair,
            "shape": shape,
            "dtype": dtype,
            "nrep": int(first["nrep"]),
            "MB": float(first["MB"]),
        }
        for key, peer in (
            ("copy", COPY),
            ("fused", FUSED),
            ("llmc_seed", LLMC_SEED),
            ("llmc_best", LLMC_BEST),
            ("unfused", UNFUSED),
        ):
            line[f"{key}_ms"], line[f"{key}_config"] = _time(group, peer)
        compiled = group[(group["kind"] == COMPILED) & (group["status"] == STATUS_OK)]
        if compiled.empty:
            line["compile_ms"], line["compile_mode"] = math.nan, ""
        else:
            best = compiled.loc[compiled["time_ms"].astype(float).idxmin()]
            line["compile_ms"], line["compile_mode"] = float(best["time_ms"]), str(best["peer"])
        fused = line["fused_ms"]
        line["fused_x_copy"] = fused / line["copy_ms"]
        for key in ("llmc_seed", "llmc_best", "unfused", "compile"):
            line[f"{key}_x_fused"] = line[f"{key}_ms"] / fused
        row = pd.Series(line)
        for target in TARGETS:
            line[target.column] = verdict(target, row)
        lines.append(line)
    return pd.DataFrame(lines)


SUMMARY_COLUMNS: dict[str, tuple[str, str]] = {
    "pair": ("pair", ""),
    "shape": ("shape", ""),
    "dtype": ("dtype", ""),
    "MB": ("MB", ".1f"),
    "copy_ms": ("copy ms", ".4f"),
    "fused_ms": ("fused ms", ".4f"),
    "fused_x_copy": ("fused / copy", ".3f"),
    "llmc_seed_x_fused": ("llm.c k1@128 / fused", "x"),
    "llmc_best_x_fused": ("llm.c best blocks / fused", "x"),
    "unfused_x_fused": ("best unfused / fused", "x"),
    "compile_x_fused": ("torch.compile / fused", "x"),
    **{t.column: (t.header, "") for t in TARGETS},
}
CONFIG_COLUMNS: dict[str, tuple[str, str]] = {
    "pair": ("pair", ""),
    "shape": ("shape", ""),
    "dtype": ("dtype", ""),
    "fused_config": ("fused configuration", ""),
    "unfused_config": ("best unfused chain", ""),
    "llmc_best_config": ("llm.c best blocks", ""),
    "compile_mode": ("fastest torch.compile", ""),
    "compile_ms": ("its ms", ".4f"),
}


def render(frame: pd.DataFrame) -> str:
    """The markdown a run prints last and writes beside its parquet: the times against the
    fused op with the targets, the configurations behind them, the tally, the failures."""
    if frame.empty:
        return "no rows"
    lines_ = summary(frame)
    first = frame.iloc[0]
    verdicts = [v for t in TARGETS for v in lines_[t.column]]
    met = sum(v.startswith("met") for v in verdicts)
    unmet = sum(v.startswith("UNMET") for v in verdicts)
    missing = sum(v == "not measured" for v in verdicts)
    out = [
        f"Chain benchmark, run `{first['run_id']}` on {first['gpu_name'] or 'an unnamed GPU'}: "
        "times are the fastest of the interleaved rounds' medians (CUDA events, L2 flushed before "
        "each call); `x` columns are the peer's time over the fused op's, `fused / copy` the fused "
        "op over a device copy of its own bytes.",
        "",
        markdown(lines_, SUMMARY_COLUMNS),
        "",
        markdown(lines_, CONFIG_COLUMNS),
        "",
        f"Targets: {met} met, {unmet} unmet, {missing} not measured.",
    ]
    failed = frame[frame["status"] != STATUS_OK]
    for _, r in failed.iterrows():
        out.append(
            f"- {r['pair']} {r['shape']} {r['dtype']} {r['peer']}: {r['status']}: {fmt(r['message'])[:300]}"
        )
    return "\n".join(out)
