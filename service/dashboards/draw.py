"""Plotly figures from the DataFrames of dashboards.data (drawing only, no selection)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

import variants

LAYOUT = {"template": "plotly_white", "margin": {"l": 70, "r": 30, "t": 60, "b": 60}}
# One colour per dtype and per family, the same on every chart.
DTYPE_COLORS = {"fp32": "#4C78A8", "bf16": "#F58518", "fp16": "#54A24B"}
DTYPE_SYMBOLS = {"fp32": "circle", "bf16": "diamond", "fp16": "square"}
FAMILY_COLORS = {
    "naive": "#9D9D9D",
    "gather": "#B279A2",
    "vec": "#4C78A8",
    "warp_per_head": "#E45756",
    "split": "#54A24B",
    "tile": "#72B7B2",
    "bulk": "#EECA3B",
    "flat": "#FF9DA6",
}
GPU_PATTERNS = ("", "/", "x", ".", "\\", "+", "-", "|")
COPY_COLOR = "#333333"
BASELINE_COLOR = "#7F7F7F"
PEAK_COLOR = "#C0392B"


def _empty(title: str) -> go.Figure:
    fig = go.Figure(layout={**LAYOUT, "title": title})
    fig.add_annotation(text="no data", showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    return fig


def reference_line(fig: go.Figure, y: float, text: str, *, dash: str, color: str, log_y: bool) -> None:
    """A horizontal line across the plot with its label just above it, at its right end.

    The line is a shape named `text` (shapes take data values on a log axis); the label an
    annotation of the same name, whose y on a log axis must be log10 of the value: plotly's
    own hline annotation puts it at 10**value there."""
    fig.add_hline(y=y, line_dash=dash, line_color=color, line_width=1.5, name=text)
    fig.add_annotation(
        name=text,
        text=text,
        x=1,
        xref="paper",
        xanchor="right",
        y=math.log10(y) if log_y else y,
        yref="y",
        yanchor="bottom",
        showarrow=False,
        font={"size": 11, "color": color},
        bgcolor="rgba(255,255,255,0.75)",
    )


def _ratio_range(values: pd.Series, reference: float = 1.0) -> list[float]:
    """A y range around the data and the reference line, so 0.94 and 1.06 look different."""
    finite = pd.to_numeric(values, errors="coerce").replace([np.inf, -np.inf], np.nan).dropna()
    if finite.empty:
        return [0.8, 1.2]
    low = min(0.8, math.floor((finite.min() - 0.03) * 20) / 20)
    high = max(reference + 0.1, math.ceil((finite.max() + 0.04) * 20) / 20)
    return [max(low, 0.0), high]


def log_ticks(*columns: object) -> dict:
    """Tick values 1, 2, 5 x 10^k over the positive values given (1..9 x 10^k where that
    would leave fewer than three), labelled as plain numbers: plotly's own log ticks label
    the minor ones with a bare digit."""
    values = np.concatenate([np.atleast_1d(np.asarray(c, dtype=float)) for c in columns if c is not None])
    values = values[np.isfinite(values) & (values > 0)]
    if values.size == 0:
        return {}
    low, high = float(values.min()), float(values.max())
    decades = range(math.floor(math.log10(low)) - 1, math.ceil(math.log10(high)) + 1)
    for steps in ((1, 2, 5), tuple(range(1, 10))):
        ticks = [m * 10.0**k for k in decades for m in steps]
        ticks = [float(f"{t:.6g}") for t in ticks if low / 1.25 <= t <= high * 1.25]
        if len(ticks) >= 3:
            break
    return {"tickvals": ticks, "ticktext": [f"{t:g}" for t in ticks]}


def _shape_axis(table: pd.DataFrame) -> dict:
    order = list(dict.fromkeys(table["short_shape"]))
    return {
        "title": "shape: B×T NH/NH_KV/HD (smallest first)",
        "type": "category",
        "categoryorder": "array",
        "categoryarray": order,
    }


def _by_gpu_and_dtype(table: pd.DataFrame):
    gpus = sorted(table["gpu"].unique())
    for g, gpu in enumerate(gpus):
        for dtype in _dtypes_in(table):
            rows = table[(table["gpu"] == gpu) & (table["dtype"] == dtype)]
            if len(rows):
                name = dtype if len(gpus) == 1 else f"{gpu} {dtype}"
                yield name, GPU_PATTERNS[g % len(GPU_PATTERNS)], dtype, rows


def overview_ratio(table: pd.DataFrame) -> go.Figure:
    """Winner's time over the copy, per shape; one bar per dtype (and GPU)."""
    if table.empty:
        return _empty("Winner / device copy")
    fig = go.Figure(
        layout={
            **LAYOUT,
            "title": "Winner's time / device copy of the same bytes (below 1 beats the copy; "
            "* held to cudaMemcpyAsync alone)",
            "barmode": "group",
            "xaxis": _shape_axis(table),
            "yaxis": {"title": "time / copy", "range": _ratio_range(table["ratio_to_copy"])},
            "legend": {"title": {"text": "dtype"}},
        }
    )
    for name, pattern, dtype, rows in _by_gpu_and_dtype(table):
        fig.add_bar(
            name=name,
            x=rows["short_shape"],
            y=rows["ratio_to_copy"],
            marker={"color": DTYPE_COLORS.get(dtype), "pattern": {"shape": pattern}},
            text=[ratio_label(v, m) for v, m in zip(rows["ratio_to_copy"], copy_methods(rows), strict=True)],
            textposition="outside",
            textfont={"size": 9},
            customdata=np.column_stack(
                [rows[["config_key", "time_ms", "gpu", "dtype"]].to_numpy(), copy_descriptions(rows)]
            ),
            hovertemplate="%{customdata[2]} %{x} %{customdata[3]}<br>%{y:.3f}x copy (%{customdata[4]})<br>"
            "%{customdata[1]:.4f} ms<br>%{customdata[0]}<extra></extra>",
        )
    reference_line(fig, 1.0, "device copy = 1.0", dash="dot", color=COPY_COLOR, log_y=False)
    return fig


def copy_methods(rows: pd.DataFrame) -> list[str | None]:
    """Each row's copy_method (results.schema.COPY_FASTEST), None where it was not recorded."""
    if "copy_method" not in rows:
        return [None] * len(rows)
    return [m if isinstance(m, str) else None for m in rows["copy_method"]]


def ratio_label(ratio: float, method: str | None) -> str:
    """A bar's label: the ratio, starred where the copy was cudaMemcpyAsync alone (rows timed
    before the faster copy: at odd byte counts that copy was slow, so the ratio reads low)."""
    if pd.isna(ratio):
        return ""
    return f"{ratio:.2f}" if method else f"{ratio:.2f}*"


def copy_descriptions(rows: pd.DataFrame) -> list[str]:
    return [
        "the faster of cudaMemcpyAsync and a copy kernel" if m else "cudaMemcpyAsync alone"
        for m in copy_methods(rows)
    ]


def overview_speedup(table: pd.DataFrame) -> go.Figure:
    if table.empty or table["speedup_vs_baseline"].isna().all():
        return _empty("Speed-up over llm.c")
    fig = go.Figure(
        layout={
            **LAYOUT,
            "title": "Speed-up over llm.c's kernel1 at block 128 (same GPU, shape and dtype)",
            "barmode": "group",
            "xaxis": _shape_axis(table),
            "yaxis": {"title": "speed-up (x)", "rangemode": "tozero"},
            "legend": {"title": {"text": "dtype"}},
        }
    )
    for name, pattern, dtype, rows in _by_gpu_and_dtype(table):
        fig.add_bar(
            name=name,
            x=rows["short_shape"],
            y=rows["speedup_vs_baseline"],
            marker={"color": DTYPE_COLORS.get(dtype), "pattern": {"shape": pattern}},
            customdata=rows[["gpu", "dtype", "baseline_ms", "time_ms"]].to_numpy(),
            hovertemplate="%{customdata[0]} %{x} %{customdata[1]}<br>%{y:.2f}x<br>"
            "llm.c %{customdata[2]:.4f} ms, winner %{customdata[3]:.4f} ms<extra></extra>",
        )
    return fig


def family_vs_best(table: pd.DataFrame) -> go.Figure:
    """Family x (shape, dtype): each family's best time over the shape's best (1.00 = wins)."""
    if table.empty:
        return _empty("Families across shapes")
    several = table["gpu"].nunique() > 1
    table = table.assign(
        column=(table["gpu"] + " " if several else "") + table["short_shape"] + " " + table["dtype"]
    )
    columns = list(dict.fromkeys(table["column"]))
    order = table.groupby("family")["ratio_to_best"].median().sort_values(kind="stable").index.tolist()
    ratio = table.pivot_table(index="family", columns="column", values="ratio_to_best", aggfunc="min")
    times = table.pivot_table(index="family", columns="column", values="time_ms", aggfunc="min")
    ratio, times = ratio.reindex(index=order, columns=columns), times.reindex(index=order, columns=columns)
    z = ratio.to_numpy(dtype=float)
    fig = go.Figure(
        go.Heatmap(
            z=np.where(np.isnan(z), None, z).tolist(),
            x=columns,
            y=order,
            customdata=np.where(
                np.isnan(times.to_numpy(dtype=float)), None, times.to_numpy(dtype=float)
            ).tolist(),
            zmin=1.0,
            zmax=2.0,
            colorscale=[
                [0.0, "#1a9850"],
                [0.05, "#91cf60"],
                [0.2, "#fee08b"],
                [0.5, "#fc8d59"],
                [1.0, "#d73027"],
            ],
            texttemplate="%{z:.2f}",
            textfont={"size": 10},
            colorbar={
                "title": "x best",
                "tickvals": [1, 1.25, 1.5, 1.75, 2],
                "ticktext": ["1", "1.25", "1.5", "1.75", "2+"],
            },
            hovertemplate="%{y} at %{x}<br>%{z:.3f}x the best<br>%{customdata:.4f} ms<extra></extra>",
            xgap=1,
            ygap=1,
        ),
        layout={
            **LAYOUT,
            "title": "Family against family: each family's best time / the best of any family, per shape",
            "height": 140 + 45 * len(order),
            "xaxis": {"type": "category", "tickangle": -45, "title": "shape and dtype (smallest first)"},
            "yaxis": {"autorange": "reversed", "automargin": True},
        },
    )
    return fig


def heatmap(table: pd.DataFrame, winner: dict | None = None) -> go.Figure:
    if table.empty:
        return _empty("Variant x block size")
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
            "title": "Best time per variant and block size (ms); ★ = the winner",
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
        return _empty("Every trial")
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
        return _empty("Search convergence")
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


def bandwidth(table: pd.DataFrame, peak: tuple[str, float] | None) -> go.Figure:
    """Achieved GB/s against bytes moved: the winners per dtype, the same-process copy and
    llm.c's baseline per shape, and the GPU's peak when it is known."""
    if table.empty:
        return _empty("Achieved bandwidth")
    fig = go.Figure(
        layout={
            **LAYOUT,
            "title": "Achieved bandwidth against bytes moved (every dout read once, every dinp written once)",
            "xaxis": {
                "title": "bytes moved, MB (log)",
                "type": "log",
                **log_ticks(table["bytes_moved"] / 1e6),
            },
            "yaxis": {"title": "GB/s", "rangemode": "tozero"},
            "height": 520,
        }
    )
    mb = table["bytes_moved"] / 1e6
    labels = (table["short_shape"] + " " + table["dtype"]).to_numpy()
    fig.add_scatter(
        name="llm.c kernel1, block 128",
        x=mb,
        y=table["baseline_gbps"],
        mode="markers",
        marker={"symbol": "circle-open", "size": 9, "color": BASELINE_COLOR},
        text=labels,
        hovertemplate="%{text}<br>llm.c: %{y:.0f} GB/s<extra></extra>",
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
    for dtype in _dtypes_in(table):
        rows = table[table["dtype"] == dtype]
        fig.add_scatter(
            name=f"winner {dtype}",
            x=rows["bytes_moved"] / 1e6,
            y=rows["gbps"],
            mode="markers",
            marker=_dtype_marker(dtype),
            text=rows["short_shape"],
            customdata=rows[["config_key", "time_ms", "ratio_to_copy"]].to_numpy(),
            hovertemplate="%{text} " + dtype + "<br>%{y:.0f} GB/s, %{customdata[1]:.4f} ms, "
            "%{customdata[2]:.3f}x copy<br>%{customdata[0]}<extra></extra>",
        )
    if peak is not None:
        name, gbps = peak
        label = f"{name} peak {gbps / 1000:.2f} TB/s"
        reference_line(fig, gbps, label, dash="dashdot", color=PEAK_COLOR, log_y=False)
    return fig


def _dtypes_in(table: pd.DataFrame) -> list[str]:
    """The table's dtypes, in variants.DTYPES order (so colours and legends stay put)."""
    present = set(table["dtype"])
    return [d for d in variants.DTYPES if d in present]


def _dtype_marker(dtype: str) -> dict:
    """One winner's marker: its dtype's colour and symbol."""
    return {
        "size": 10,
        "color": DTYPE_COLORS.get(dtype),
        "symbol": DTYPE_SYMBOLS.get(dtype, "circle"),
        "opacity": 0.85,
        "line": {"color": "#fff", "width": 1},
    }


def bandwidth_ratio(table: pd.DataFrame) -> go.Figure:
    """Time over the copy against bytes moved, per dtype, with the copy's line at 1."""
    if table.empty:
        return _empty("Time / copy against bytes moved")
    fig = go.Figure(
        layout={
            **LAYOUT,
            "title": "Winner's time / device copy against bytes moved (below 1 beats the copy)",
            "xaxis": {
                "title": "bytes moved, MB (log)",
                "type": "log",
                **log_ticks(table["bytes_moved"] / 1e6),
            },
            "yaxis": {"title": "time / copy", "range": _ratio_range(table["ratio_to_copy"])},
        }
    )
    for dtype in _dtypes_in(table):
        rows = table[table["dtype"] == dtype]
        fig.add_scatter(
            name=dtype,
            x=rows["bytes_moved"] / 1e6,
            y=rows["ratio_to_copy"],
            mode="markers",
            marker=_dtype_marker(dtype),
            text=rows["short_shape"],
            customdata=rows[["config_key", "time_ms"]].to_numpy(),
            hovertemplate="%{text} " + dtype + "<br>%{y:.3f}x copy, %{customdata[1]:.4f} ms"
            "<br>%{customdata[0]}<extra></extra>",
        )
    reference_line(fig, 1.0, "device copy = 1.0", dash="dot", color=COPY_COLOR, log_y=False)
    return fig


def gpu_winners(table: pd.DataFrame) -> go.Figure:
    if table.empty:
        return _empty("Winner per GPU")
    fig = go.Figure(
        layout={
            **LAYOUT,
            "title": "Winner per GPU: time / device copy",
            "yaxis": {"title": "time / copy", "range": _ratio_range(table["ratio_to_copy"])},
        }
    )
    fig.add_bar(
        x=table["gpu"],
        y=table["ratio_to_copy"],
        text=table["config_key"],
        marker={"color": [FAMILY_COLORS.get(f, "#636EFA") for f in table["family"]]},
        customdata=table[["time_ms", "gbps"]].to_numpy(),
        hovertemplate="%{x}<br>%{y:.3f}x copy<br>%{customdata[0]:.4f} ms, %{customdata[1]:.0f} GB/s"
        "<br>%{text}<extra></extra>",
        textposition="inside",
        width=0.5,
        showlegend=False,
    )
    reference_line(fig, 1.0, "device copy = 1.0", dash="dot", color=COPY_COLOR, log_y=False)
    return fig


def gpu_families(table: pd.DataFrame) -> go.Figure:
    """Per GPU, each family's best time over the best of any family there (1 = the winner)."""
    if table.empty:
        return _empty("Best per family and GPU")
    fig = go.Figure(
        layout={
            **LAYOUT,
            "title": "Each family's best time / the GPU's best (1 = the winning family)",
            "barmode": "group",
            "yaxis": {"title": "x the best (log)", "type": "log", **log_ticks(table["ratio_to_best"], 1.0)},
            "legend": {"title": {"text": "family"}},
        }
    )
    for family, rows in table.groupby("family", sort=True):
        fig.add_bar(
            name=str(family),
            x=rows["gpu"],
            y=rows["ratio_to_best"],
            marker={"color": FAMILY_COLORS.get(str(family))},
            text=rows["ratio_to_best"].map(lambda v: f"{v:.2f}x"),
            textposition="outside",
            customdata=rows[["time_ms"]].to_numpy(),
            hovertemplate=f"{family}<br>%{{x}}: %{{customdata[0]:.4f}} ms, "
            "%{y:.3f}x the best<extra></extra>",
        )
    return fig
