"""The dashboards' data: pure functions from trial rows (or the store index) to small
DataFrames and dicts, one module per job. Drawing happens in dashboards.draw, from what these
return."""

from .overview import (
    BANDWIDTH_COLUMNS,
    FAMILY_COLUMNS,
    OVERVIEW_COLUMNS,
    bandwidth,
    family_best,
    family_vs_best,
    gpu_comparison,
    gpu_names,
    gpu_peaks,
    overview,
    peak_bandwidth,
)
from .rows import (
    block_size,
    gpu_order,
    in_shape_order,
    row_shape,
    shape_label,
    shapes_in_order,
    short_shape,
    usable,
    variant,
)
from .selection import NEAREST_COLUMNS, default_gpu, nearest_tuned, served_instead, tuned_shapes
from .shape import (
    convergence,
    heatmap,
    heatmap_winner,
    reference_times,
    scatter,
    search_series,
    shape_trials,
)

__all__ = [
    "BANDWIDTH_COLUMNS",
    "FAMILY_COLUMNS",
    "NEAREST_COLUMNS",
    "OVERVIEW_COLUMNS",
    "bandwidth",
    "block_size",
    "convergence",
    "default_gpu",
    "family_best",
    "family_vs_best",
    "gpu_comparison",
    "gpu_names",
    "gpu_order",
    "gpu_peaks",
    "heatmap",
    "heatmap_winner",
    "in_shape_order",
    "nearest_tuned",
    "overview",
    "peak_bandwidth",
    "reference_times",
    "row_shape",
    "scatter",
    "search_series",
    "served_instead",
    "shape_label",
    "shape_trials",
    "shapes_in_order",
    "short_shape",
    "tuned_shapes",
    "usable",
    "variant",
]
