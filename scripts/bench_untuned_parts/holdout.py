"""Planning a hold-out run of scripts/bench_untuned.py without a GPU (scripts/judge_untuned.py
judges recorded runs with the same pieces): what the exported header launches for a shape, the
store without a head layout, and the stored shapes of preset layouts."""

from __future__ import annotations

import pandas as pd

import variants
from results.header import plan
from variants import Config, Shape


def header_choice(table, shape: Shape, dtype, op: str = variants.DEFAULT_OP) -> Config | None:
    """What the exported header (`results.header.plan`) launches for the shape: its row's
    configuration, or for a layout without rows the layout rule's generic kernel; None where
    its entry point copies instead (NH == NH_KV for an op that `copies_without_replicas`)."""
    if shape.NH == shape.NH_KV and variants.get_op(op).copies_without_replicas:
        return None
    chosen = plan(table, dtype.name, shape)
    if chosen.row >= 0:
        row = table.rows[chosen.row]
        return next(c for c in variants.get_op(op).family(row.family).space() if c.key == row.config_key)
    return table.fallback.kernels[dtype.name][-1 - chosen.kernel].config


def without_layout(rows: pd.DataFrame, op: str, shape: Shape) -> pd.DataFrame:
    """The store's rows less every row of `op` at the shape's head layout (all dtypes and B*T)."""
    layout = (rows["NH"] == shape.NH) & (rows["NH_KV"] == shape.NH_KV) & (rows["HD"] == shape.HD)
    return rows[~(layout & (rows["op"].astype(str) == op))]


def stored_shapes(index, gpu: str, layouts: list[tuple[int, int, int]]) -> list[Shape]:
    """Every shape of the index's GPU at these head layouts."""
    found = {g.shape for g in index.groups_of(gpu) if g.shape.layout in layouts}
    return sorted(found, key=lambda s: (layouts.index(s.layout), s.tokens))
