"""The GPUs page's figures, from data.gpu_comparison and data.family_best: one shape's winner
on every GPU (family by colour, % of HBM peak and time over the copy side by side), and each
family's best against the GPU's best."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .common import (
    FAMILY_COLORS,
    LAYOUT,
    MIN_FONT,
    config_lines,
    copy_axis,
    empty,
    gpu_label,
    gpus_in_order,
    layout,
    log_ticks,
    number,
    reference_vline,
    title,
)

OTHER_COLOR = "#636EFA"


def _gpu_axis(table: pd.DataFrame) -> dict:
    """A category axis of the table's GPUs in data.gpu_order's order, each in its colour."""
    gpus = gpus_in_order(table)
    return {
        "type": "category",
        "categoryorder": "array",
        "categoryarray": [g for g, _ in gpus],
        "tickmode": "array",
        "tickvals": [g for g, _ in gpus],
        "ticktext": [gpu_label(g, o) for g, o in gpus],
    }


def gpu_winners(table: pd.DataFrame) -> go.Figure:
    """Per GPU (rows, in order), its winner's % of HBM peak and time over the copy (from 0,
    the copy's line at 1), side by side; bars in the winner family's colour, named on them."""
    if table.empty:
        return empty("Winner per GPU")
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.04)
    colors = [FAMILY_COLORS.get(f, OTHER_COLOR) for f in table["family"]]
    hover = [
        f"{row.gpu}<br>{config_lines(row.config_key)}<br>{number(row.time_ms, '.4f')} ms, "
        f"{number(row.gbps, '.0f')} GB/s"
        for row in table.itertuples()
    ]
    panels = (
        (
            table["pct_of_peak"],
            [
                f"{f} · {number(v, '.0f', '%')}"
                for f, v in zip(table["family"], table["pct_of_peak"], strict=True)
            ],
        ),
        (table["ratio_to_copy"], [f"{number(v, '.2f', '×')}" for v in table["ratio_to_copy"]]),
    )
    # The ratio's label inside its bar's end: outside, the copy's line at 1 would cross it.
    for col, (values, text) in enumerate(panels, start=1):
        fig.add_bar(
            x=values,
            y=table["gpu"],
            orientation="h",
            marker={"color": colors},
            text=text,
            textposition="outside" if col == 1 else "inside",
            insidetextanchor="end",
            textfont={"size": MIN_FONT + 1},
            constraintext="none",
            cliponaxis=False,
            hovertext=hover,
            hovertemplate="%{hovertext}<br>%{x:.3f}<extra></extra>",
            width=0.6,
            showlegend=False,
            row=1,
            col=col,
        )
    fig.update_layout(
        layout(
            title=title("Winner per GPU: bar colour = winning family; % of HBM peak and time / device copy"),
            height=max(260, 70 * len(table) + 150),
        )
    )
    fig.update_yaxes(**_gpu_axis(table), autorange="reversed")
    fig.update_xaxes(range=[0, 120], dtick=20, ticksuffix="%", title="% of HBM peak", row=1, col=1)
    fig.update_xaxes(**copy_axis(table["ratio_to_copy"]), title="time / device copy", row=1, col=2)
    reference_vline(fig, 1.0, "device copy = 1", col=2)
    return fig


def gpu_families(table: pd.DataFrame) -> go.Figure:
    """Per GPU, each family's best time over the best of any family there (1 = the winner)."""
    if table.empty:
        return empty("Best per family and GPU")
    fig = go.Figure(
        layout={
            **LAYOUT,
            "title": title("Each family's best time / the GPU's best (1 = the winning family)"),
            "barmode": "group",
            "xaxis": _gpu_axis(table),
            "yaxis": {"title": "× the best (log)", "type": "log", **log_ticks(table["ratio_to_best"], 1.0)},
            "legend": {"title": {"text": "family"}},
        }
    )
    for family, rows in table.groupby("family", sort=True):
        fig.add_bar(
            name=str(family),
            x=rows["gpu"],
            y=rows["ratio_to_best"],
            marker={"color": FAMILY_COLORS.get(str(family), OTHER_COLOR)},
            text=rows["ratio_to_best"].map(lambda v: f"{v:.2f}"),
            textposition="outside",
            textfont={"size": MIN_FONT},
            constraintext="none",
            cliponaxis=False,
            customdata=rows[["time_ms"]].to_numpy(),
            hovertemplate=f"{family}<br>%{{x}}: %{{customdata[0]:.4f}} ms, "
            "%{y:.3f}× the best<extra></extra>",
        )
    return fig
