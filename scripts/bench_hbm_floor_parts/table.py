"""The summary of a run's rows and its markdown table (no GPU)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from variants import DEFAULT_OP

KEYS = ("op", "shape", "dtype")


def with_op(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows with an `op` column: those of runs from before --op measured repkv backward."""
    return frame if "op" in frame.columns else frame.assign(op=DEFAULT_OP)


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (op, shape, dtype): each side's time over the memcpy's, event-timed and by
    device time, and the tuned kernel over the twin."""
    out = []
    for (op, shape, dtype), g in with_op(frame).groupby(list(KEYS), sort=False):
        t = g.set_index("side")
        row: dict[str, Any] = {"op": op, "shape": shape, "dtype": dtype, "MB": float(g["MB"].iloc[0])}
        for basis, col in (("", "time_ms"), ("dev ", "device_us")):
            copy = t.at["memcpy", col]
            rw = t.at["read", col] + t.at["write", col]
            row[f"{basis}copy kernel"] = t.at["copy", col] / copy
            row[f"{basis}read+write"] = rw / copy
            row[f"{basis}twin"] = t.at["twin", col] / copy
            row[f"{basis}tuned"] = t.at["tuned", col] / copy
            row[f"{basis}tuned/twin"] = t.at["tuned", col] / t.at["twin", col]
            row[f"{basis}tuned/fastest copy"] = t.at["tuned", col] / min(copy, t.at["copy", col])
        out.append(row)
    return pd.DataFrame(out)


def render(frame: pd.DataFrame) -> str:
    table = summary(frame)
    cols = [c for c in table.columns if c not in (*KEYS, "MB")]
    head = "| op | shape | dtype | MB | " + " | ".join(cols) + " |"
    lines = [
        "Time over the same run's cudaMemcpy of half the bytes (event-timed, then 'dev': device time):",
        "",
        head,
        "|---|---|---|--:|" + "--:|" * len(cols),
    ]
    for _, r in table.iterrows():
        cells = " | ".join(f"{r[c]:.3f}" for c in cols)
        lines.append(f"| {r['op']} | {r['shape']} | {r['dtype']} | {r['MB']:.1f} | {cells} |")
    return "\n".join(lines)
