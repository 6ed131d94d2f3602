"""A pair's rows of graph.parquet (one per side: the shape, the measures and each as a multiple
of the tuned kernel's, the GPU) and the line printed for each."""

from __future__ import annotations

from typing import Any

from variants import DType, Shape

from .arithmetic import CALLS_PER_GRAPH, MEASURES, relative


def pair_rows(
    shape: Shape,
    dtype: DType,
    configs: dict[str, str],
    measures: dict[str, dict[str, float]],
    gpu_name: str,
    gpu_label: str,
) -> list[dict[str, Any]]:
    """The pair's rows, each side's line printed as it comes."""
    name = dtype.name
    rows: list[dict[str, Any]] = []
    ratios = relative(measures)
    for side, measure in measures.items():
        rows.append(
            {
                **shape.as_dict(),
                "shape": shape.key,
                "dtype": name,
                "MB": shape.bytes_moved(dtype) / 1e6,
            }
            | {"side": side, "config": configs.get(side, "")}
            | measure
            | ratios[side]
            | {
                "gpu": gpu_name,
                "gpu_label": gpu_label,
                "calls_per_graph": CALLS_PER_GRAPH,
            }
        )
        figures = "".join(
            f" {m} {measure[m + '_us']:6.2f} ({ratios[side][m + '_x_tuned']:.3f})"
            for m in MEASURES
            if m + "_us" in measure
        )
        if "held_us" in measure:
            figures += (
                f" p80 {measure['held_p80_us']:6.2f} slow {measure['held_slow_share']:.2f}"
                f" enqueue {measure['held_enqueue_us']:5.1f}"
                f" gpu {measure['held_gpu_us_per_call']:5.1f} us/call"
            )
        print(f"{shape.key:32} {name} {side:36}{figures}", flush=True)
    return rows
