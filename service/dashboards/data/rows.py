"""Row helpers every dashboard view shares: which rows can be placed (`usable`), shape labels,
block sizes and variants from the params, selections by GPU and shape, and the order of GPUs
and shapes every chart keeps."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

import variants
from results.schema import L2_COLD, SHAPE_COLUMNS, Status, l2_states, rows_of_op
from variants import Shape

TEXT_COLUMNS = ("gpu", "dtype", "family", "status")


def shape_label(row: pd.Series | dict) -> str:
    return " ".join(f"{c}={int(row[c])}" for c in SHAPE_COLUMNS)


def short_shape(row: pd.Series | dict) -> str:
    """'8×1024 32/8/128': B×T, then NH/NH_KV/HD."""
    return f"{int(row['B'])}×{int(row['T'])} {int(row['NH'])}/{int(row['NH_KV'])}/{int(row['HD'])}"


def row_shape(row: pd.Series | dict) -> Shape:
    return Shape(*(int(row[c]) for c in SHAPE_COLUMNS))


def usable(frame: pd.DataFrame, l2: str = L2_COLD) -> pd.DataFrame:
    """The rows the dashboards can place: timed in L2 state `l2` (cold by default: rows tuned
    with `--l2 fed` rank apart, and only the overview's fed table reads them), a GPU label, a
    known dtype, a family and a status (non-empty strings) and a valid shape. Other rows are
    dropped, never a reason to fail; the shape columns come back as int64."""
    missing = [c for c in (*TEXT_COLUMNS, *SHAPE_COLUMNS) if c not in frame.columns]
    if missing or frame.empty:
        return frame.iloc[0:0] if missing else frame
    keep = (l2_states(frame) == l2).to_numpy(dtype=bool, copy=True)
    for column in TEXT_COLUMNS:
        keep &= _non_empty_text(frame[column])
    keep &= frame["dtype"].isin(list(variants.DTYPES)).to_numpy(dtype=bool, na_value=False)
    dims = {c: pd.to_numeric(frame[c], errors="coerce") for c in SHAPE_COLUMNS}
    for values in dims.values():
        keep &= (values.notna() & (values >= 1) & (values == values.round())).to_numpy(
            dtype=bool, na_value=False
        )
    divides = dims["NH"] % dims["NH_KV"].where(dims["NH_KV"] >= 1) == 0
    keep &= divides.to_numpy(dtype=bool, na_value=False)
    if keep.all() and all(frame[c].dtype == np.int64 for c in SHAPE_COLUMNS):
        return frame
    rows = frame[keep].copy()
    for column in SHAPE_COLUMNS:
        rows[column] = dims[column][keep].astype(np.int64)
    return rows


def _non_empty_text(values: pd.Series) -> np.ndarray:
    if isinstance(values.dtype, pd.StringDtype):  # as loaded from parquet: only nulls to find
        return (values.notna() & (values.str.len() > 0)).to_numpy(dtype=bool, na_value=False)
    return values.map(lambda v: isinstance(v, str) and v != "").to_numpy(dtype=bool, na_value=False)


def gpu_order(frame: pd.DataFrame) -> dict[str, int]:
    """Every GPU label with placeable rows (cold or fed), in the order every chart and legend
    keeps: sorted by label. A GPU's colour is taken by its position here, so that it is the
    same on every page, whichever GPUs a page shows."""
    if "gpu" not in frame or frame.empty:
        return {}
    labels = set()
    for state in sorted(set(l2_states(frame))):
        rows = usable(frame, state)
        labels |= set(rows["gpu"]) if len(rows) else set()
    return {label: i for i, label in enumerate(sorted(labels))}


def params(text: object) -> dict:
    """A row's params JSON as a dict ({} when it is not one)."""
    try:
        value = json.loads(text) if isinstance(text, str) else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def block_size(frame: pd.DataFrame) -> pd.Series:
    """Threads per block of every row: the recorded launch `block`, else from the params
    (`block`, or 32 * `warps` for warp_per_head). Int64, NA where neither is known."""

    def from_params(text: object) -> float:
        p = params(text)
        if isinstance(p.get("block"), int):
            return float(p["block"])
        if isinstance(p.get("warps"), int):
            return float(32 * p["warps"])
        return math.nan

    recorded = (
        pd.to_numeric(frame["block"], errors="coerce") if "block" in frame else pd.Series(np.nan, frame.index)
    )
    derived = frame["params"].map(from_params) if len(frame) else pd.Series(dtype=float)
    return recorded.fillna(derived).astype("Int64")


def variant(frame: pd.DataFrame) -> pd.Series:
    """The family with every parameter but the block size: 'vec load=ldg store=plain vec_bytes=16'."""

    def name(family: str, text: object) -> str:
        rest = [f"{k}={v}" for k, v in sorted(params(text).items()) if k not in ("block", "warps")]
        return " ".join([family, *rest])

    return pd.Series(
        [name(f, p) for f, p in zip(frame["family"], frame["params"], strict=True)],
        index=frame.index,
        dtype=object,
    )


def op_of_row(row: pd.Series | dict) -> variants.Op:
    """The op a row measured (repkv backward's where the row names none, or one unknown)."""
    name = row.get("op")
    return variants.OPS.get(name, variants.get_op()) if isinstance(name, str) else variants.get_op()


def bytes_moved(row: pd.Series | dict) -> int:
    """The fewest bytes the row's op must move at its shape and dtype (`Op.bytes_moved`)."""
    return op_of_row(row).bytes_moved(row_shape(row), variants.get_dtype(row["dtype"]))


def moved_bytes_text(op: str | None = None) -> str:
    """What an op's bytes moved are: 'every dout read once, every dinp written once'."""
    descriptor = variants.get_op(op)
    reads = ", ".join(operand.name for operand in descriptor.inputs)
    return f"every {reads} read once, every {descriptor.output.name} written once"


def of_op(frame: pd.DataFrame, op: str | None) -> pd.DataFrame:
    """The rows of op `op` (results.schema.rows_of_op); every row with None."""
    return frame if op is None else rows_of_op(frame, op)


def family_order() -> dict[str, int]:
    """Every family name of every op, in the registry's order (ops, then each op's families):
    repkv backward's first, as before there were other ops."""
    names = dict.fromkeys(name for op in variants.OPS.values() for name in op.families)
    return {name: i for i, name in enumerate(names)}


def of_gpu(frame: pd.DataFrame, gpu: str) -> pd.DataFrame:
    if "gpu" not in frame:
        return frame.iloc[0:0]
    return frame[(frame["gpu"] == gpu).to_numpy(dtype=bool, na_value=False)]


def select_shape(frame: pd.DataFrame, shape: Shape, dtype: str | None = None) -> pd.DataFrame:
    mask = pd.Series(True, index=frame.index) if dtype is None else frame["dtype"] == dtype
    for column in SHAPE_COLUMNS:
        mask &= frame[column] == getattr(shape, column)
    return frame[mask.to_numpy(dtype=bool, na_value=False)]


def in_shape_order(table: pd.DataFrame) -> pd.DataFrame:
    """GPU, then shapes by elements moved (smallest first), then dtype in DTYPES order."""
    dtype_order = {name: i for i, name in enumerate(variants.DTYPES)}
    elements = table["B"] * table["T"] * (table["NH"] * 4 + 2 * table["NH_KV"]) * table["HD"]
    keys = table.assign(_elements=elements, _dtype=table["dtype"].map(dtype_order))
    keys = keys.sort_values(["gpu", "_elements", *SHAPE_COLUMNS, "_dtype"], kind="stable")
    return keys.drop(columns=["_elements", "_dtype"])


def ok_rows(trials: pd.DataFrame) -> pd.DataFrame:
    """The correct trials with a finite time."""
    times = pd.to_numeric(trials["time_ms"], errors="coerce")
    return trials[((trials["status"] == Status.OK) & np.isfinite(times)).to_numpy(dtype=bool, na_value=False)]


def shapes_in_order(table: pd.DataFrame) -> list[str]:
    """The table's `short_shape` labels, each once, smallest shape first (in_shape_order's
    order, whichever GPUs and dtypes hold them): the rows of the overview's charts."""
    if table.empty:
        return []
    ordered = in_shape_order(table.assign(gpu=""))
    return list(dict.fromkeys(ordered["short_shape"]))
