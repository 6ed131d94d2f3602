"""Plotly figures from the DataFrames of dashboards.data (drawing only, no selection), one
module per page; colours, symbols and reference lines shared in common."""

from .bandwidth import bandwidth, bandwidth_ratio
from .common import (
    DTYPE_SYMBOLS,
    FAMILY_COLORS,
    GPU_COLORS,
    MIN_FONT,
    copy_axis,
    gpu_color,
    log_ticks,
    ratio_range,
    reference_line,
    reference_vline,
)
from .gpus import gpu_families, gpu_winners
from .overview import BOARD_SHAPES, family_vs_best, overview_board, overview_speedup
from .shape import convergence, heatmap, trials_scatter

__all__ = [
    "BOARD_SHAPES",
    "DTYPE_SYMBOLS",
    "FAMILY_COLORS",
    "GPU_COLORS",
    "MIN_FONT",
    "bandwidth",
    "bandwidth_ratio",
    "convergence",
    "copy_axis",
    "family_vs_best",
    "gpu_color",
    "gpu_families",
    "gpu_winners",
    "heatmap",
    "log_ticks",
    "overview_board",
    "overview_speedup",
    "ratio_range",
    "reference_line",
    "reference_vline",
    "trials_scatter",
]

# The name the overview's route knew the first chart by, before the board replaced the bars.
overview_ratio = overview_board
