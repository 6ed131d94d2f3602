"""Plotly figures from the DataFrames of dashboards.data (drawing only, no selection)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

LAYOUT = {"template": "plotly_white", "margin": {"l": 60, "r": 20, "t": 50, "b": 60}}


def _empty(title: str) -> go.Figure:
    fig = go.Figure(layout={**LAYOUT, "title": title})
    fig.add_annotation(text="no data", showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    return fig


def overview_ratio(table: pd.DataFrame) -> go.Figure:
    """Winner's time over the copy, per shape and dtype, one bar group per GPU."""
    if table.empty:
        return _empty("Winner / device copy")
    fig = go.Figure(
        layout={
            **LAYOUT,
            "title": "Winner's time / device copy (lower is better; 1 = copy)",
            "barmode": "group",
            "yaxis": {"title": "time / copy"},
        }
    )
    for gpu, rows in table.groupby("gpu", sort=True):
        fig.add_bar(
            name=str(gpu),
            x=rows["shape"] + " " + rows["dtype"],
            y=rows["ratio_to_copy"],
            customdata=rows[["config_key", "time_ms"]].to_numpy(),
            hovertemplate="%{x}<br>%{y:.3f}x copy<br>%{customdata[0]}<br>%{customdata[1]:.4f} ms",
        )
    fig.add_hline(y=1.0, line_dash="dot", annotation_text="copy")
    return fig


def overview_speedup(table: pd.DataFrame) -> go.Figure:
    if table.empty:
        return _empty("Speed-up over llm.c")
    fig = go.Figure(
        layout={
            **LAYOUT,
            "title": "Speed-up over llm.c's kernel1 at block 128",
            "barmode": "group",
            "yaxis": {"title": "speed-up"},
        }
    )
    for gpu, rows in table.groupby("gpu", sort=True):
        fig.add_bar(name=str(gpu), x=rows["shape"] + " " + rows["dtype"], y=rows["speedup_vs_baseline"])
    return fig


def heatmap(table: pd.DataFrame) -> go.Figure:
    if table.empty:
        return _empty("Variant x block size")
    z = table.to_numpy(dtype=float)
    best = float(np.nanmin(z))
    # The colours span the best time to 3x it (slower cells saturate), so that the
    # differences among the good configurations stay visible beside llm.c's baseline.
    fig = go.Figure(
        go.Heatmap(
            z=np.where(np.isnan(z), None, z).tolist(),
            x=[str(int(c)) for c in table.columns],
            y=list(table.index),
            colorscale="Viridis_r",
            zmin=best,
            zmax=min(float(np.nanmax(z)), 3 * best) if np.nanmax(z) > best else best * 1.01,
            colorbar={"title": "ms (3x best and slower: darkest)"},
            hovertemplate="%{y}<br>block %{x}<br>%{z:.4f} ms<extra></extra>",
        ),
        layout={
            **LAYOUT,
            "title": "Best time per variant and block size (ms)",
            "height": max(350, 22 * len(table) + 150),
            "xaxis": {"title": "threads per block", "type": "category"},
            "yaxis": {"autorange": "reversed", "automargin": True},
        },
    )
    return fig


def trials_scatter(points: pd.DataFrame, baseline_ms: float | None) -> go.Figure:
    ok = points.dropna(subset=["time_ms"])
    if ok.empty:
        return _empty("Every trial")
    fig = go.Figure(
        layout={
            **LAYOUT,
            "title": "Every correct trial (failed trials are not drawn)",
            "xaxis": {"title": "trial"},
            "yaxis": {"title": "ms", "type": "log"},
        }
    )
    for family, rows in ok.groupby("family", sort=True):
        fig.add_scatter(
            name=str(family),
            x=rows["trial_number"].astype(float),
            y=rows["time_ms"],
            mode="markers",
            text=rows["config_key"],
            hovertemplate="trial %{x}<br>%{y:.4f} ms<br>%{text}<extra></extra>",
        )
    if baseline_ms:
        fig.add_hline(y=baseline_ms, line_dash="dash", annotation_text="llm.c baseline")
    return fig


def convergence(curve: pd.DataFrame, baseline_ms: float | None, copy_ms: float | None) -> go.Figure:
    if curve.empty or curve["best_so_far_ms"].isna().all():
        return _empty("Search convergence")
    fig = go.Figure(
        layout={
            **LAYOUT,
            "title": "Search convergence: best so far",
            "xaxis": {"title": "trial"},
            "yaxis": {"title": "ms", "type": "log"},
        }
    )
    for series, rows in curve.groupby("series", sort=True):
        fig.add_scatter(
            name=str(series),
            x=rows["trial_number"].astype(float),
            y=rows["best_so_far_ms"],
            mode="lines",
            line_shape="hv",
        )
    if baseline_ms:
        fig.add_hline(y=baseline_ms, line_dash="dash", annotation_text="llm.c baseline")
    if copy_ms:
        fig.add_hline(y=copy_ms, line_dash="dot", annotation_text="device copy")
    return fig


def gpu_winners(table: pd.DataFrame) -> go.Figure:
    if table.empty:
        return _empty("Winner per GPU")
    fig = go.Figure(
        layout={**LAYOUT, "title": "Winner per GPU: time / device copy", "yaxis": {"title": "time / copy"}}
    )
    fig.add_bar(
        x=table["gpu"],
        y=table["ratio_to_copy"],
        text=table["config_key"],
        customdata=table[["time_ms", "gbps"]].to_numpy(),
        hovertemplate="%{x}<br>%{y:.3f}x copy<br>%{customdata[0]:.4f} ms, %{customdata[1]:.0f} GB/s"
        "<br>%{text}<extra></extra>",
    )
    fig.add_hline(y=1.0, line_dash="dot", annotation_text="copy")
    return fig


def gpu_families(table: pd.DataFrame) -> go.Figure:
    if table.empty:
        return _empty("Best per family and GPU")
    fig = go.Figure(
        layout={
            **LAYOUT,
            "title": "Best time per family and GPU (ms)",
            "barmode": "group",
            "yaxis": {"title": "ms", "type": "log"},
        }
    )
    for family, rows in table.groupby("family", sort=True):
        fig.add_bar(name=str(family), x=rows["gpu"], y=rows["time_ms"])
    return fig
