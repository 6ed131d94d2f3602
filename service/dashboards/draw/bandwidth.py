"""The bandwidth page's figures, from data.bandwidth: achieved GB/s against bytes moved beside
the copy, llm.c and the GPU's peak, and the winner's time over the copy."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from .common import (
    BASELINE_COLOR,
    COPY_COLOR,
    DTYPE_SYMBOLS,
    LAYOUT,
    PEAK_COLOR,
    dtypes_in,
    empty,
    gpu_color,
    log_ticks,
    ratio_range,
    reference_line,
    title,
)


def _winner_marker(dtype: str, order: object) -> dict:
    """One winner's marker: its GPU's colour, its dtype's symbol."""
    return {
        "size": 10,
        "color": gpu_color(order),
        "symbol": DTYPE_SYMBOLS.get(dtype, "circle"),
        "opacity": 0.85,
        "line": {"color": "#fff", "width": 1},
    }


def _mb_axis(table: pd.DataFrame) -> dict:
    return {"title": "bytes moved, MB (log)", "type": "log", **log_ticks(table["bytes_moved"] / 1e6)}


def bandwidth(
    table: pd.DataFrame,
    peak: tuple[str, float] | None,
    moved: str = "every dout read once, every dinp written once",
    baseline: str = "llm.c kernel1, block 128",
) -> go.Figure:
    """Achieved GB/s against bytes moved: the winners per dtype, the same-process copy and
    llm.c's baseline per shape, and the GPU's peak when it is known. `moved` says what the
    bytes are (the op's tensors: data.moved_bytes_text)."""
    if table.empty:
        return empty("Achieved bandwidth")
    fig = go.Figure(
        layout={
            **LAYOUT,
            "title": title(f"Achieved bandwidth against bytes moved ({moved})"),
            "xaxis": _mb_axis(table),
            "yaxis": {"title": "GB/s", "rangemode": "tozero"},
            "height": 520,
        }
    )
    mb = table["bytes_moved"] / 1e6
    labels = (table["short_shape"] + " " + table["dtype"]).to_numpy()
    fig.add_scatter(
        name=baseline,
        x=mb,
        y=table["baseline_gbps"],
        mode="markers",
        marker={"symbol": "circle-open", "size": 9, "color": BASELINE_COLOR},
        text=labels,
        hovertemplate="%{text}<br>" + baseline + ": %{y:.0f} GB/s<extra></extra>",
    )
    fig.add_scatter(
        name="device copy (same bytes, same process)",
        x=mb,
        y=table["copy_gbps"],
        mode="markers",
        marker={"symbol": "line-ew-open", "size": 16, "color": COPY_COLOR, "line": {"width": 2}},
        text=labels,
        hovertemplate="%{text}<br>copy: %{y:.0f} GB/s<extra></extra>",
    )
    for dtype in dtypes_in(table):
        rows = table[table["dtype"] == dtype]
        fig.add_scatter(
            name=f"winner {dtype}",
            x=rows["bytes_moved"] / 1e6,
            y=rows["gbps"],
            mode="markers",
            marker=_winner_marker(dtype, rows["gpu_order"].iloc[0]),
            text=rows["short_shape"],
            customdata=rows[["config_key", "time_ms", "ratio_to_copy", "pct_of_peak"]].to_numpy(),
            hovertemplate="%{text} " + dtype + "<br>%{y:.0f} GB/s (%{customdata[3]:.1f}% of peak), "
            "%{customdata[1]:.4f} ms, %{customdata[2]:.3f}× copy<br>%{customdata[0]}<extra></extra>",
        )
    if peak is not None:
        name, gbps = peak
        label = f"{name} peak {gbps / 1000:.2f} TB/s"
        reference_line(fig, gbps, label, dash="dashdot", color=PEAK_COLOR, log_y=False)
    return fig


def bandwidth_ratio(table: pd.DataFrame) -> go.Figure:
    """Time over the copy against bytes moved, per dtype, from 0, with the copy's line at 1."""
    if table.empty:
        return empty("Time / copy against bytes moved")
    fig = go.Figure(
        layout={
            **LAYOUT,
            "title": title("Winner's time / device copy against bytes moved (below 1 beats the copy)"),
            "xaxis": _mb_axis(table),
            "yaxis": {"title": "time / copy", "range": ratio_range(table["ratio_to_copy"]), "dtick": 0.25},
        }
    )
    for dtype in dtypes_in(table):
        rows = table[table["dtype"] == dtype]
        fig.add_scatter(
            name=dtype,
            x=rows["bytes_moved"] / 1e6,
            y=rows["ratio_to_copy"],
            mode="markers",
            marker=_winner_marker(dtype, rows["gpu_order"].iloc[0]),
            text=rows["short_shape"],
            customdata=rows[["config_key", "time_ms"]].to_numpy(),
            hovertemplate="%{text} " + dtype + "<br>%{y:.3f}× copy, %{customdata[1]:.4f} ms"
            "<br>%{customdata[0]}<extra></extra>",
        )
    reference_line(fig, 1.0, "device copy = 1.0", dash="dot", color=COPY_COLOR, log_y=False)
    return fig
