"""The peers benchmark's tables: `markdown` draws any frame as a markdown table, `render` the
tables a run prints last from its summary (tuner.peers.summary)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from tuner.peers.names import DEVICE_CALLS, DEVICE_PEERS


def fmt(value: Any, spec: str = ".4g") -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return "" if math.isnan(value) else format(value, spec)
    return str(value)


def markdown(frame: pd.DataFrame, columns: Mapping[str, tuple[str, str]]) -> str:
    """A markdown table of frame: columns maps a column to (header, format spec; "" for text,
    "x" for a ratio drawn as 1.23x, "%" for a fraction drawn as 45.6%)."""
    headers = [header for header, _ in columns.values()]
    numeric = [spec not in ("",) for _, spec in columns.values()]
    lines = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("--:" if n else "---" for n in numeric) + "|",
    ]
    for _, row in frame.iterrows():
        cells = []
        for name, (_, spec) in columns.items():
            value = row.get(name)
            if spec == "x":
                text = fmt(value, ".2f")
                cells.append(text + "x" if text else "")
            elif spec == "%":
                text = fmt(value * 100 if isinstance(value, float) else value, ".1f")
                cells.append(text + "%" if text else "")
            else:
                cells.append(fmt(value, spec) if spec else fmt(value))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


BANDWIDTH_COLUMNS: dict[str, tuple[str, str]] = {
    "shape": ("shape", ""),
    "dtype": ("dtype", ""),
    "MB": ("MB", ".1f"),
    "copy_ms": ("copy ms", ".4f"),
    "copy_gbps": ("copy GB/s", ".0f"),
    "empty_ms": ("empty launch ms", ".4f"),
    "copy_x_empty": ("copy / empty", "x"),
    "tuned_gbps": ("tuned GB/s", ".0f"),
    "tuned_frac_peak": ("tuned % of peak", "%"),
    "tuned_x_empty": ("tuned / empty", "x"),
    "tuned_x_copy": ("tuned / copy", "x"),
}

MAIN_COLUMNS: dict[str, tuple[str, str]] = {
    "shape": ("shape", ""),
    "dtype": ("dtype", ""),
    "MB": ("MB", ".1f"),
    "tuned_ms": ("tuned ms", ".4f"),
    "tuned_x_copy": ("x copy", ".3f"),
    "fastest_peer": ("fastest peer", ""),
    "fastest_peer_ms": ("peer ms", ".4f"),
    "vs_fastest_peer": ("tuned vs peer", "x"),
    "h2h_vs_peer": ("head to head", "x"),
    "vs_llmc_seed": ("vs llm.c k1@128", "x"),
    "llmc_best_block": ("k1 best block", ""),
    "vs_llmc_best": ("vs k1 best", "x"),
    "not_timed": ("not timed", ".0f"),
}


DEVICE_COLUMNS: dict[str, tuple[str, str]] = {
    "shape": ("shape", ""),
    "dtype": ("dtype", ""),
    "MB": ("MB", ".1f"),
    "tuned_device_us": ("tuned us", ".2f"),
    "copy_device_us": ("copy us", ".2f"),
    "tuned_device_x_copy": ("x copy", ".3f"),
    "empty_device_us": ("empty us", ".2f"),
    "device_peer": ("fastest profiled peer", ""),
    "device_peer_us": ("peer us", ".2f"),
    "device_peer_kernels": ("its kernels", ".0f"),
    "device_vs_peer": ("tuned vs peer", "x"),
}


def render(summary_frame: pd.DataFrame) -> str:
    """The tables the run prints last: bandwidth and fixed costs, then the comparison ("head
    to head": the fastest peer's time over the tuned kernel's when the two were timed again in
    interleaved rounds; "not timed": rows of the pair that failed or were skipped, listed in
    the log and the parquet), then, where the run profiled, the device times."""
    frame = summary_frame.copy()
    nearest = frame["tuned_match"] == "nearest"
    frame["shape"] = frame["shape"].str.replace(r"[A-Z_]+=", "", regex=True)
    frame.loc[nearest, "dtype"] = frame.loc[nearest, "dtype"] + " (nearest)"
    text = "\n\n".join(
        [
            "Bandwidth and fixed costs (GB/s = bytes moved / time; empty = an empty kernel launch):",
            markdown(frame, BANDWIDTH_COLUMNS),
            "Tuned kernel against its peers (ratios are peer time / tuned time: above 1 the tuned "
            "kernel is faster; head to head: the same two timed again in interleaved rounds; "
            "shape = B,T,NH,NH_KV,HD):",
            markdown(frame, MAIN_COLUMNS),
        ]
    )
    profiled = frame[frame["tuned_device_us"].notna()]
    if len(profiled):
        text += "\n\n" + "\n\n".join(
            [
                f"Device time per call (the profiler's kernel and copy durations, launch latency "
                f"excluded; median of {DEVICE_CALLS} flushed calls; peers: the {DEVICE_PEERS} "
                "fastest by event time, the fastest of them here by device time):",
                markdown(profiled, DEVICE_COLUMNS),
            ]
        )
    return text
