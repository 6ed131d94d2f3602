"""What every chart shares: the layout, one colour per family and per GPU (the same on every
page), one symbol per dtype, reference lines with their labels, axis ranges and ticks."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

import variants

# Every text a chart draws is at least MIN_FONT px: readable in a 1400 px wide window.
MIN_FONT = 11
LAYOUT = {
    "template": "plotly_white",
    "font": {"size": 12},
    "title": {"font": {"size": 16}},
    "margin": {"l": 70, "r": 30, "t": 60, "b": 60},
}
# One colour per family, the same on every chart (the winner's family is told by colour).
FAMILY_COLORS = {
    "naive": "#9D9D9D",
    "gather": "#B279A2",
    "vec": "#4C78A8",
    "warp_per_head": "#E45756",
    "split": "#54A24B",
    "tile": "#F58518",
    "bulk": "#EECA3B",
    "flat": "#FF9DA6",
    "split_runtime": "#9E765F",  # split's layout read at run time
    "flat_runtime": "#D67195",  # flat's layout read at run time (the RoPE forward's)
    "rotate_runtime": "#8CD17D",  # the fused backward at nrep 1, layout read at run time
    "replicate": "#72B7B2",  # the forward ops'
    "warp_sum": "#00A6D6",  # a warp per K/V group (the backward ops at large nrep)
    "warp_sum_runtime": "#005F73",  # warp_sum's layout read at run time
}
# One colour per GPU, by its place among the store's GPUs (data.gpu_order): dark and
# saturated, apart from the families' colours. dtypes are told apart by symbol.
GPU_COLORS = ("#1F3A93", "#B03A2E", "#0E6655", "#7D3C98", "#9A7D0A", "#17202A", "#A04000", "#1B4F72")
DTYPE_SYMBOLS = {"fp32": "circle", "bf16": "diamond", "fp16": "square"}
COPY_COLOR = "#333333"
BASELINE_COLOR = "#7F7F7F"
PEAK_COLOR = "#C0392B"


def gpu_color(order: object) -> str:
    """The colour of the GPU at this place of data.gpu_order."""
    return GPU_COLORS[int(order) % len(GPU_COLORS)] if pd.notna(order) else GPU_COLORS[0]  # type: ignore[arg-type]


def gpu_label(gpu: str, order: object) -> str:
    """A GPU's name in its colour (plotly's pseudo-HTML), for tick labels."""
    return f'<span style="color:{gpu_color(order)}"><b>{gpu}</b></span>'


def gpus_in_order(table: pd.DataFrame) -> list[tuple[str, int]]:
    """(GPU, place) of the GPUs in the table, in data.gpu_order's order."""
    pairs = table[["gpu", "gpu_order"]].drop_duplicates().sort_values("gpu_order", kind="stable")
    return [(str(g), int(o)) for g, o in pairs.itertuples(index=False)]


def dtypes_in(table: pd.DataFrame) -> list[str]:
    """The table's dtypes, in variants.DTYPES order (so colours and legends stay put)."""
    present = set(table["dtype"])
    return [d for d in variants.DTYPES if d in present]


def empty(title: str) -> go.Figure:
    fig = go.Figure(layout={**LAYOUT, "title": {**LAYOUT["title"], "text": title}})
    fig.add_annotation(text="no data", showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    return fig


def layout(**overrides: object) -> dict:
    """LAYOUT with some of its keys replaced (fig.update_layout(layout(...)))."""
    return {**LAYOUT, **overrides}


def title(text: str) -> dict:
    return {**LAYOUT["title"], "text": text}


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
        font={"size": MIN_FONT, "color": color},
        bgcolor="rgba(255,255,255,0.75)",
    )


def reference_vline(fig: go.Figure, x: float, name: str, *, col: int, color: str = COPY_COLOR) -> None:
    """A dotted vertical line at x across subplot column `col` (row 1), a shape named `name`;
    its label is the axis' tick there (copy_axis), where no data point can cover it."""
    fig.add_vline(x=x, line_dash="dot", line_color=color, line_width=1.5, name=name, row=1, col=col)


def copy_axis(values: pd.Series) -> dict:
    """A time/copy axis: from 0 (ratio_range), ticks every 0.25, the one at 1 reading
    '1 = copy' in bold."""
    low, high = ratio_range(values)
    ticks = [t / 4 for t in range(int(low * 4), int(high * 4) + 1)]
    return {
        "range": [low, high],
        "tickmode": "array",
        "tickvals": ticks,
        "ticktext": ["<b>1 = copy</b>" if t == 1 else f"{t:g}" for t in ticks],
    }


def ratio_range(values: pd.Series, reference: float = 1.0) -> list[float]:
    """A time/copy axis from 0 (a bar's length is its value) to past the data and the copy's
    line at `reference`."""
    finite = pd.to_numeric(values, errors="coerce").replace([np.inf, -np.inf], np.nan).dropna()
    top = float(finite.max()) if len(finite) else reference
    return [0.0, max(reference + 0.25, math.ceil((top + 0.05) * 4) / 4)]


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


def copy_methods(rows: pd.DataFrame) -> list[str | None]:
    """Each row's copy_method (results.schema.COPY_FASTEST), None where it was not recorded."""
    if "copy_method" not in rows:
        return [None] * len(rows)
    return [m if isinstance(m, str) else None for m in rows["copy_method"]]


def copy_descriptions(rows: pd.DataFrame) -> list[str]:
    """How each row's copy was timed: rows timed before the faster copy held to
    cudaMemcpyAsync alone, slow at odd byte counts, so that their ratio reads low."""
    return [
        "the faster of cudaMemcpyAsync and a copy kernel" if m else "cudaMemcpyAsync alone"
        for m in copy_methods(rows)
    ]


def number(value: object, fmt: str, suffix: str = "") -> str:
    """A value for a label or a hover: formatted, or '-' where it is unknown."""
    if value is None or value is pd.NA or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return format(float(value), fmt) + suffix  # type: ignore[arg-type]


def config_lines(config_key: str) -> str:
    """'split[block=256,items=2,...]' as 'split' and its parameters, one per line (hovers)."""
    name, _, rest = str(config_key).partition("[")
    return "<br>".join([f"<b>{name}</b>", *(p for p in rest.rstrip("]").split(",") if p)])
