"""The overview's figures, from data.overview and data.family_vs_best: the winners' board (which
family wins per GPU, shape and dtype; % of HBM peak and time over the copy beside it), the
speed-up over llm.c, and each family against the best."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from service.dashboards.data.rows import family_order, shapes_in_order

from .common import (
    COPY_COLOR,
    DTYPE_SYMBOLS,
    FAMILY_COLORS,
    MIN_FONT,
    config_lines,
    copy_axis,
    copy_descriptions,
    copy_methods,
    dtypes_in,
    empty,
    gpu_color,
    gpu_label,
    gpus_in_order,
    layout,
    number,
    reference_vline,
    title,
)

ROW_PX = 18  # one shape per row: room for a 12 px label and a dot per dtype
# The board fits up to 48 shapes into BOARD_PX, so that a 1400 x 1000 window shows it whole
# under the page's header; its rows are never under 14 px (an 11 px text and a gap).
BOARD_PX, BOARD_ROW_PX = 680, 14
BOARD_SHAPES = BOARD_PX // BOARD_ROW_PX  # the shapes of one overview page (the rest: its next pages)
OTHER_COLOR = "#636EFA"


def _rows_height(shapes: int, extra: int, row_px: int = ROW_PX) -> int:
    return max(300, row_px * shapes + extra)


def board_row_px(shapes: int) -> int:
    """The board's row height: ROW_PX, less where that many rows would not fit BOARD_PX."""
    return max(BOARD_ROW_PX, min(ROW_PX, BOARD_PX // max(shapes, 1)))


def _families_in(table: pd.DataFrame) -> list[str]:
    """The table's families, in the registry's order (every op's: data.rows.family_order;
    unknown ones last, by name)."""
    present = set(table["family"])
    known = [f for f in family_order() if f in present]
    return known + sorted(present - set(known))


def _columns(table: pd.DataFrame) -> list[tuple[str, int, str]]:
    """The board's columns, (GPU, its place, dtype): GPUs in order, then dtypes."""
    dtypes = dtypes_in(table)
    return [(gpu, order, dtype) for gpu, order in gpus_in_order(table) for dtype in dtypes]


def _discrete(colors: list[str]) -> list[list]:
    """A colour scale where the integer z = i takes colors[i] (z from -0.5 to n - 0.5)."""
    n = len(colors)
    return [[edge, color] for i, color in enumerate(colors) for edge in (i / n, (i + 1) / n)]


def _hover(row: pd.Series, copy: str) -> str:
    return (
        f"{row['gpu']} {row['short_shape']} {row['dtype']}<br>{config_lines(row['config_key'])}<br>"
        f"{number(row['time_ms'], '.4f')} ms, {number(row['gbps'], '.0f')} GB/s<br>"
        f"{number(row['pct_of_peak'], '.1f', '%')} of HBM peak, "
        f"{number(row['ratio_to_copy'], '.3f', '×')} the copy ({copy})<br>{int(row['trials'])} trials"
    )


def overview_board(table: pd.DataFrame) -> go.Figure:
    """Per shape (rows, smallest first): the winning family of each GPU and dtype by colour
    and name (its parameters on hover), then, side by side, the winners' % of the GPU's HBM
    peak and their time over the device copy (from 0, with the copy's line at 1): one colour
    per GPU, one symbol per dtype."""
    if table.empty:
        return empty("Winners")
    shapes, columns, families = shapes_in_order(table), _columns(table), _families_in(table)
    several = len({gpu for gpu, _, _ in columns}) > 1
    labels = [f"{gpu_label(g, o)}<br>{d}" if several else d for g, o, d in columns]
    z = np.full((len(shapes), len(columns)), np.nan)
    text = [["" for _ in columns] for _ in shapes]
    hover = [["not tuned" for _ in columns] for _ in shapes]
    where = {(g, d): j for j, (g, _, d) in enumerate(columns)}
    copies = dict(zip(table.index, copy_descriptions(table), strict=True))
    for index, row in table.iterrows():
        i, j = shapes.index(row["short_shape"]), where[(row["gpu"], row["dtype"])]
        z[i, j] = families.index(row["family"])
        text[i][j] = str(row["family"])
        hover[i][j] = _hover(row, copies[index])
    fig = make_subplots(
        rows=1, cols=3, shared_yaxes=True, horizontal_spacing=0.025, column_widths=[0.4, 0.3, 0.3]
    )
    fig.add_heatmap(
        z=np.where(np.isnan(z), None, z).tolist(),
        x=labels,
        y=shapes,
        text=text,
        texttemplate="%{text}",
        textfont={"size": MIN_FONT},
        hovertext=hover,
        hovertemplate="%{hovertext}<extra></extra>",
        colorscale=_discrete([FAMILY_COLORS.get(f, OTHER_COLOR) for f in families]),
        zmin=-0.5,
        zmax=len(families) - 0.5,
        showscale=False,
        xgap=2,
        ygap=2,
        name="winner",
        row=1,
        col=1,
    )
    for family in families:  # the colours' legend
        fig.add_scatter(
            x=[None],
            y=[None],
            mode="markers",
            name=family,
            legendgroup="family",
            legendgrouptitle_text="winner family",
            hoverinfo="skip",
            row=1,
            col=1,
            marker={"symbol": "square", "size": 13, "color": FAMILY_COLORS.get(family, OTHER_COLOR)},
        )
    _dots(fig, table)
    gpu = "" if several else f" on {gpu_label(*gpus_in_order(table)[0])}"
    fig.update_layout(
        layout(
            title=title(f"Which configuration wins{gpu}, and how close it comes to the hardware"),
            height=_rows_height(len(shapes), 120, board_row_px(len(shapes))),
            margin={"l": 20, "r": 20, "t": 100, "b": 20},
            scattermode="group",
            scattergap=0.35,
            legend={"tracegroupgap": 12, "groupclick": "toggleitem"},
        )
    )
    fig.update_yaxes(type="category", categoryorder="array", categoryarray=shapes, autorange="reversed")
    fig.update_yaxes(automargin=True, title="shape: B×T NH/NH_KV/HD", row=1, col=1)
    fig.update_xaxes(side="top", automargin=True)
    fig.update_xaxes(type="category", title="winner: family (hover for its parameters)", row=1, col=1)
    fig.update_xaxes(range=[0, 105], dtick=20, ticksuffix="%", title="% of HBM peak", row=1, col=2)
    held = "<br>hollow: the copy was cudaMemcpyAsync alone" if not all(copy_methods(table)) else ""
    ratio_title = f"time / device copy (below 1 beats it){held}"
    fig.update_xaxes(**copy_axis(table["ratio_to_copy"]), title=ratio_title, row=1, col=3)
    reference_vline(fig, 1.0, "device copy = 1", col=3)
    return fig


def _dots(fig: go.Figure, table: pd.DataFrame) -> None:
    """% of peak (column 2) and time / copy (column 3): a dot per GPU and dtype per shape,
    hollow where the copy was cudaMemcpyAsync alone (it reads low at odd byte counts)."""
    several = table["gpu"].nunique() > 1
    for gpu, order in gpus_in_order(table):
        for dtype in dtypes_in(table):
            rows = table[(table["gpu"] == gpu) & (table["dtype"] == dtype)]
            if rows.empty:
                continue
            symbol = DTYPE_SYMBOLS.get(dtype, "circle")
            hollow = [symbol if m else f"{symbol}-open" for m in copy_methods(rows)]
            name = f"{gpu} {dtype}" if several else dtype
            common = {
                "y": rows["short_shape"],
                "mode": "markers",
                "orientation": "h",
                "offsetgroup": f"{gpu} {dtype}",
                "legendgroup": "points",
                "customdata": np.column_stack([rows["config_key"], copy_descriptions(rows)]),
            }
            marker = {"color": gpu_color(order), "size": 9, "line": {"width": 1.5, "color": gpu_color(order)}}
            fig.add_scatter(
                **common,
                x=rows["pct_of_peak"],
                name=name,
                legendgrouptitle_text="GPU, dtype",
                marker={**marker, "symbol": symbol},
                row=1,
                col=2,
                hovertemplate=f"{gpu} %{{y}} {dtype}<br>%{{x:.1f}}% of HBM peak<br>"
                "%{customdata[0]}<extra></extra>",
            )
            fig.add_scatter(
                **common,
                x=rows["ratio_to_copy"],
                name=name,
                showlegend=False,
                marker={**marker, "symbol": hollow},
                row=1,
                col=3,
                hovertemplate=f"{gpu} %{{y}} {dtype}<br>%{{x:.3f}}× the copy (%{{customdata[1]}})<br>"
                "%{customdata[0]}<extra></extra>",
            )
    known = table.groupby("gpu")["pct_of_peak"].apply(lambda values: values.notna().any())
    unknown = [gpu for gpu, _ in gpus_in_order(table) if not known[gpu]]
    if unknown:
        fig.add_annotation(
            text="no known peak: " + ", ".join(unknown),
            x=0.02,
            y=0.0,
            xref="x2 domain",
            yref="y domain",
            xanchor="left",
            yanchor="bottom",
            showarrow=False,
            font={"size": MIN_FONT, "color": COPY_COLOR},
        )


def overview_speedup(table: pd.DataFrame) -> go.Figure:
    """The winner's speed-up over llm.c's kernel1 at block 128: a panel per dtype, a bar per
    GPU (in its colour) per shape, labelled where there is one GPU."""
    if table.empty or table["speedup_vs_baseline"].isna().all():
        return empty("Speed-up over llm.c")
    shapes, dtypes, gpus = shapes_in_order(table), dtypes_in(table), gpus_in_order(table)
    fig = make_subplots(
        rows=1, cols=len(dtypes), shared_yaxes=True, subplot_titles=dtypes, horizontal_spacing=0.03
    )
    top = float(pd.to_numeric(table["speedup_vs_baseline"], errors="coerce").max())
    for col, dtype in enumerate(dtypes, start=1):
        for gpu, order in gpus:
            rows = table[(table["gpu"] == gpu) & (table["dtype"] == dtype)]
            fig.add_bar(
                x=rows["speedup_vs_baseline"],
                y=rows["short_shape"],
                orientation="h",
                name=gpu,
                legendgroup=gpu,
                showlegend=col == 1,
                marker={"color": gpu_color(order)},
                text=[number(v, ".1f", "×") for v in rows["speedup_vs_baseline"]] if len(gpus) == 1 else None,
                textposition="outside",
                textfont={"size": MIN_FONT},
                constraintext="none",
                cliponaxis=False,
                customdata=rows[["baseline_ms", "time_ms"]].to_numpy(),
                hovertemplate=f"{gpu} %{{y}} {dtype}<br>%{{x:.2f}}× llm.c<br>"
                "llm.c %{customdata[0]:.4f} ms, winner %{customdata[1]:.4f} ms<extra></extra>",
                row=1,
                col=col,
            )
    fig.update_layout(
        layout(
            title=title("Speed-up over llm.c's kernel1 at block 128 (same GPU, shape and dtype)"),
            height=_rows_height(len(shapes), 140),
            barmode="group",
            legend={"title": {"text": "GPU"}},
        )
    )
    fig.update_yaxes(type="category", categoryorder="array", categoryarray=shapes, autorange="reversed")
    fig.update_yaxes(automargin=True, row=1, col=1)
    fig.update_xaxes(range=[0, top * 1.18], title="× llm.c", automargin=True)
    return fig


def _ratio_text(value: float) -> str:
    if np.isnan(value):
        return ""
    return f"{value:.2f}" if value < 10 else f"{value:.0f}"


def family_vs_best(table: pd.DataFrame) -> go.Figure:
    """(GPU,) shape x family, a panel per dtype: each family's best time over the best of any
    family there (1.00 = it wins); a row per shape, so that the numbers have room."""
    if table.empty:
        return empty("Families across shapes")
    several = table["gpu"].nunique() > 1
    table = table.assign(row=(table["gpu"] + " " if several else "") + table["short_shape"])
    table = table.sort_values("gpu_order", kind="stable")
    rows, dtypes, families = list(dict.fromkeys(table["row"])), dtypes_in(table), _families_in(table)
    fig = make_subplots(
        rows=1, cols=len(dtypes), shared_yaxes=True, subplot_titles=dtypes, horizontal_spacing=0.02
    )
    for col, dtype in enumerate(dtypes, start=1):
        part = table[table["dtype"] == dtype]
        ratio = part.pivot_table(index="row", columns="family", values="ratio_to_best", aggfunc="min")
        times = part.pivot_table(index="row", columns="family", values="time_ms", aggfunc="min")
        ratio = ratio.reindex(index=rows, columns=families)
        times = times.reindex(index=rows, columns=families)
        z, ms = ratio.to_numpy(dtype=float), times.to_numpy(dtype=float)
        fig.add_heatmap(
            z=np.where(np.isnan(z), None, z).tolist(),
            x=families,
            y=rows,
            text=[[_ratio_text(v) for v in line] for line in z],
            texttemplate="%{text}",
            textfont={"size": MIN_FONT},
            customdata=np.where(np.isnan(ms), None, ms).tolist(),
            zmin=1.0,
            zmax=2.0,
            showscale=col == 1,
            xgap=1,
            ygap=1,
            name=dtype,
            colorscale=[
                [0.0, "#1a9850"],
                [0.05, "#91cf60"],
                [0.2, "#fee08b"],
                [0.5, "#fc8d59"],
                [1.0, "#d73027"],
            ],
            colorbar={
                "title": {"text": "× best"},
                "tickvals": [1, 1.25, 1.5, 1.75, 2],
                "ticktext": ["1", "1.25", "1.5", "1.75", "2+"],
            },
            hovertemplate=f"%{{x}} at %{{y}} {dtype}<br>%{{z:.3f}}× the best<br>%{{customdata:.4f}} ms"
            "<extra></extra>",
            row=1,
            col=col,
        )
    fig.update_layout(
        layout(
            title=title("Family against family: each family's best time / the best of any family there"),
            height=_rows_height(len(rows), 190),
            margin={"l": 20, "r": 30, "t": 80, "b": 110},
        )
    )
    fig.update_yaxes(type="category", autorange="reversed")
    fig.update_yaxes(automargin=True, row=1, col=1)
    fig.update_xaxes(type="category", tickangle=-40, automargin=True)
    return fig
