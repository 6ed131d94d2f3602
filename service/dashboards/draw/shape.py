"""The shape page's figures, from data.heatmap, data.scatter and data.convergence: variant x
block size with the winner marked, every trial, and each search's convergence."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from .common import BASELINE_COLOR, COPY_COLOR, FAMILY_COLORS, LAYOUT, empty, log_ticks, reference_line, title


def heatmap(table: pd.DataFrame, winner: dict | None = None) -> go.Figure:
    if table.empty:
        return empty("Variant x block size")
    z = table.to_numpy(dtype=float)
    best = float(np.nanmin(z))
    # The colours span the best time to 1.5x it (slower cells saturate), so that the
    # differences among the good configurations stay visible beside llm.c's baseline.
    fig = go.Figure(
        go.Heatmap(
            z=np.where(np.isnan(z), None, z).tolist(),
            x=[str(int(c)) for c in table.columns],
            y=list(table.index),
            colorscale="Viridis_r",
            zmin=best,
            zmax=min(float(np.nanmax(z)), 1.5 * best) if np.nanmax(z) > best else best * 1.01,
            colorbar={"title": "ms (1.5x best<br>and slower:<br>darkest)"},
            hovertemplate="%{y}<br>block %{x}<br>%{z:.4f} ms<extra></extra>",
            name="best time",
        ),
        layout={
            **LAYOUT,
            "title": title("Best time per variant and block size (ms); ★ = the winner"),
            "height": max(350, 22 * len(table) + 150),
            "xaxis": {"title": "threads per block", "type": "category", "side": "top"},
            "yaxis": {"autorange": "reversed", "automargin": True, "type": "category"},
            "showlegend": False,
        },
    )
    if winner is not None:
        fig.add_scatter(
            name="winner",
            x=[str(winner["block_size"])],
            y=[winner["variant"]],
            mode="markers",
            marker={
                "symbol": "star",
                "size": 22,
                "color": "#d62728",
                "line": {"color": "#ffffff", "width": 1.5},
            },
            hovertemplate=f"winner<br>%{{y}}<br>block %{{x}}<br>{winner['time_ms']:.4f} ms<extra></extra>",
        )
    return fig


def _references(fig: go.Figure, baseline_ms: float | None, copy_ms: float | None) -> None:
    if baseline_ms:
        text = f"llm.c kernel1, block 128: {baseline_ms:.3f} ms"
        reference_line(fig, baseline_ms, text, dash="dash", color=BASELINE_COLOR, log_y=True)
    if copy_ms:
        text = f"device copy: {copy_ms:.4f} ms"
        reference_line(fig, copy_ms, text, dash="dot", color=COPY_COLOR, log_y=True)


def trials_scatter(
    points: pd.DataFrame, baseline_ms: float | None, copy_ms: float | None = None
) -> go.Figure:
    ok = points.dropna(subset=["time_ms"])
    if ok.empty:
        return empty("Every trial")
    failed = len(points) - len(ok)
    fig = go.Figure(
        layout={
            **LAYOUT,
            "title": "Every correct trial"
            + (f" ({failed} failed trials are not drawn)" if failed else "")
            + ", in the order each search measured them",
            "xaxis": {
                "title": "configurations measured (per search)",
                **({"dtick": 1} if ok["measured"].max() <= 12 else {}),  # whole numbers only
            },
            "yaxis": {"title": "ms (log)", "type": "log", **log_ticks(ok["time_ms"], baseline_ms, copy_ms)},
            "legend": {"title": {"text": "family"}},
        }
    )
    for family, rows in ok.groupby("family", sort=True):
        fig.add_scatter(
            name=str(family),
            x=rows["measured"].astype(float),
            y=rows["time_ms"],
            mode="markers",
            marker={"color": FAMILY_COLORS.get(str(family)), "size": 6, "opacity": 0.8},
            text=rows["config_key"],
            customdata=rows[["series"]].to_numpy(),
            hovertemplate="%{customdata[0]}, #%{x}<br>%{y:.4f} ms<br>%{text}<extra></extra>",
        )
    _references(fig, baseline_ms, copy_ms)
    return fig


def convergence(curve: pd.DataFrame, baseline_ms: float | None, copy_ms: float | None) -> go.Figure:
    if curve.empty or curve["best_so_far_ms"].isna().all():
        return empty("Search convergence")
    fig = go.Figure(
        layout={
            **LAYOUT,
            "title": "Search convergence: the best time found after each configuration measured",
            "xaxis": {
                "title": "configurations measured (log)",
                "type": "log",
                **log_ticks(curve["measured"]),
            },
            "yaxis": {
                "title": "best so far, ms (log)",
                "type": "log",
                **log_ticks(curve["best_so_far_ms"], baseline_ms, copy_ms),
            },
            "legend": {"title": {"text": "search"}},
        }
    )
    for series, rows in curve.groupby("series", sort=False):
        fig.add_scatter(
            name=str(series),
            x=rows["measured"].astype(float),
            y=rows["best_so_far_ms"],
            mode="lines",
            line_shape="hv",
            line={"width": 2.5},
            hovertemplate=f"{series}<br>after %{{x}}: %{{y:.4f}} ms<extra></extra>",
        )
    _references(fig, baseline_ms, copy_ms)
    return fig
