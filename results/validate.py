"""Which trial rows can be trusted: the checks a row passes before anything (the service, the
selection rule, the dashboards, a replay, the tuner's de-duplication) sees it.

Every check runs on the rows as read, before any reader groups them: a row is whole or it is
dropped, with the reason counted, so that a bad row can never stand in for good ones of its
configuration (as one with broken `params` did when rows were de-duplicated by `config_key`
first).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Collection, Iterable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import variants
from results.cells import json_object_or_none
from results.peaks import PEAK_GBPS
from results.schema import (
    GPU_LABEL_PATTERN,
    GPU_LABEL_RULE,
    L2_STATES,
    SCHEMA_VERSION,
    SHAPE_COLUMNS,
    STATUSES,
    TRIAL_SCHEMA,
    Status,
)
from variants.shape import MAX_DIM

# No memory moves bytes faster than this: an ok time below what the shape's bytes take at this
# rate is a broken row, not a measurement. It bounds the rows of a GPU whose peak is not known
# (results.peaks); a known GPU is held to PEAK_MARGIN times its own peak.
MAX_BANDWIDTH = 100e12  # bytes/s
# How far above its DRAM peak a GPU's apparent bandwidth may read: L2 serves a fed read (and
# absorbs the writes of a small shape) faster than DRAM. No row of results/data exceeds 0.94 of
# the H200's peak, fed or cold.
PEAK_MARGIN = 3.0
REQUIRED_COLUMNS = tuple(f.name for f in TRIAL_SCHEMA if not f.nullable)
# Required text that must not be empty either: what a row is found and grouped by (an empty
# run_id, as a study run without one writes, harms nothing).
NON_EMPTY_COLUMNS = ("gpu", "dtype", "family", "params", "config_key", "status")
# Optional times that, where set, must be finite and positive (a ratio is taken over each).
POSITIVE_TIMES = ("empty_launch_ms", "copy_ms")


def _examples(values: Iterable[Any], limit: int = 3) -> str:
    seen: list[str] = []
    for value in values:
        text = repr(value)
        text = text if len(text) <= 40 else text[:37] + "..."
        if text not in seen:
            seen.append(text)
        if len(seen) == limit:
            break
    return ", ".join(seen)


def _numbers(table: pa.Table, name: str, fill: float | int) -> np.ndarray:
    return pc.fill_null(table.column(name), fill).to_numpy()


def _mask(values: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return pc.fill_null(values, False).to_numpy(zero_copy_only=False)


class _Dropper:
    """Marks rows bad, each under the first reason it fails, and counts them per reason."""

    def __init__(self, rows: int) -> None:
        self.bad = np.zeros(rows, dtype=bool)
        self.reasons: dict[str, int] = {}

    def __call__(self, mask: np.ndarray, reason: str, values: pa.ChunkedArray | None = None) -> None:
        new = mask & ~self.bad
        count = int(new.sum())
        if count:
            if values is not None:
                reason = f"{reason} (e.g. {_examples(values.filter(pa.array(new)).to_pylist())})"
            self.reasons[reason] = self.reasons.get(reason, 0) + count
            self.bad |= new


def writable_rows(table: pa.Table) -> tuple[np.ndarray, dict[str, int]]:
    """Per row, whether `tuner merge` may copy it, and how many rows each reason fails: every
    required column set (NON_EMPTY_COLUMNS non-empty; a NaN in a required float column counts
    as unset, since written again through pandas it is a null, which the schema refuses), and
    numbers no reader accepts left out (`_check_numbers`: a valid shape, an ok row's time finite,
    positive and above the bandwidth floor). Names (op, family, schema version) are left to the
    reader, which may be newer than the merging code."""
    drop = _Dropper(table.num_rows)
    _check_required(table, drop)
    for name in REQUIRED_COLUMNS:
        column = table.column(name)
        if pa.types.is_floating(column.type):
            drop(_mask(pc.is_nan(column)), f"{name} is NaN")
    _check_numbers(table, drop)
    return ~drop.bad, drop.reasons


def _check_required(table: pa.Table, drop: _Dropper) -> None:
    for name in REQUIRED_COLUMNS:
        column = table.column(name)
        if name in NON_EMPTY_COLUMNS:
            drop(~_mask(pc.not_equal(column, "")), f"{name} is null or empty")
        else:
            drop(_mask(pc.is_null(column)), f"{name} is null")


def _check_names(table: pa.Table, drop: _Dropper, known_families: set[str]) -> None:
    version = _numbers(table, "schema_version", 0)
    drop(
        (version < 1) | (version > SCHEMA_VERSION),
        f"schema_version is not one this reader knows (1 to {SCHEMA_VERSION})",
        table.column("schema_version"),
    )
    gpu = table.column("gpu")
    label = _mask(pc.match_substring_regex(gpu, f"^(?:{GPU_LABEL_PATTERN.pattern})$"))
    drop(~label, f"gpu is not a GPU label ({GPU_LABEL_RULE})", gpu)
    for name, accepted in (
        ("op", tuple(variants.OPS)),
        ("status", tuple(map(str, STATUSES))),
        ("dtype", tuple(variants.DTYPES)),
    ):
        column = table.column(name)
        known = _mask(pc.is_in(column, value_set=pa.array(accepted, pa.string())))
        drop(~known, f"{name} is not one of {', '.join(accepted)}", column)
    op_column, family = table.column("op"), table.column("family")
    for op in variants.OPS.values():
        accepted = tuple(sorted(known_families if op.name == variants.DEFAULT_OP else op.families))
        of_op = _mask(pc.equal(op_column, op.name))
        known = _mask(pc.is_in(family, value_set=pa.array(accepted, pa.string())))
        drop(of_op & ~known, f"family is not one of {op.name}'s: {', '.join(accepted)}", family)
    l2 = table.column("l2")  # null: written before the column, cold
    named = _mask(pc.or_kleene(pc.is_null(l2), pc.is_in(l2, value_set=pa.array(L2_STATES, pa.string()))))
    drop(~named, f"l2 is not one of {', '.join(L2_STATES)}", l2)


@functools.lru_cache(maxsize=1 << 16)  # a store repeats each configuration across its files
def _key_of(family: str, params: str) -> str | None:
    """The configuration key `params` make in `family`, or None if they are not a JSON object."""
    values = json_object_or_none(params)
    return None if values is None else variants.Config.of(family, **values).key


def _check_config(table: pa.Table, drop: _Dropper) -> None:
    """`params` is a JSON object and `config_key` the key it makes: rows are grouped and
    de-duplicated by that key, so one row whose params say otherwise must not share it."""
    families = table.column("family").to_pylist()
    params = table.column("params").to_pylist()
    keys = table.column("config_key").to_pylist()
    unreadable = np.zeros(table.num_rows, dtype=bool)
    mismatch = np.zeros(table.num_rows, dtype=bool)
    for i in np.flatnonzero(~drop.bad):
        key = _key_of(families[i], params[i])
        unreadable[i] = key is None
        mismatch[i] = key is not None and key != keys[i]
    drop(unreadable, "params is not a JSON object", table.column("params"))
    drop(mismatch, "config_key is not the key its family and params make", table.column("config_key"))


def _floor_ms(table: pa.Table, dims: dict[str, np.ndarray]) -> np.ndarray:
    """Per row, the least time its shape's bytes take at PEAK_MARGIN times its device's peak
    (MAX_BANDWIDTH where the peak is not known)."""
    names = list(variants.DTYPES)
    sizes = np.array([0.0] + [variants.DTYPES[d].itemsize for d in names])
    positions = pc.index_in(table.column("dtype"), value_set=pa.array(names, pa.string()))
    itemsize = sizes[pc.fill_null(positions, -1).to_numpy() + 1]
    devices = list(PEAK_GBPS)
    rates = np.array([MAX_BANDWIDTH] + [PEAK_GBPS[d] * 1e9 * PEAK_MARGIN for d in devices])
    known = pc.index_in(table.column("gpu_name"), value_set=pa.array(devices, pa.string()))
    bandwidth = np.minimum(rates[pc.fill_null(known, -1).to_numpy() + 1], MAX_BANDWIDTH)
    # Op.bytes_moved, row by row: every op reads or writes one (B, T, 3, NH, HD) tensor and one
    # (B, T, NH + 2 NH_KV, HD) tensor (the RoPE ops' (T, HD) freqs_cis is left out: a lower floor)
    tokens = dims["B"].astype(float) * dims["T"]
    heads = 3 * dims["NH"].astype(float) + dims["NH"] + 2 * dims["NH_KV"]
    return tokens * heads * dims["HD"] * itemsize / bandwidth * 1e3


def _check_numbers(table: pa.Table, drop: _Dropper) -> None:
    n = table.num_rows
    dims = {name: _numbers(table, name, 0).astype(np.int64) for name in SHAPE_COLUMNS}
    in_range = np.ones(n, dtype=bool)
    for values in dims.values():
        in_range &= (values >= 1) & (values <= MAX_DIM)
    divides = in_range & (dims["NH"] % np.where(in_range, dims["NH_KV"], 1) == 0)
    if not divides.all():
        first = int(np.flatnonzero(~divides & ~drop.bad)[0]) if (~divides & ~drop.bad).any() else None
        why = ""
        if first is not None:
            try:
                variants.Shape(*(int(dims[c][first]) for c in SHAPE_COLUMNS))
            except variants.InvalidShape as exc:
                why = f" (e.g. {exc})"
        drop(~divides, f"B, T, NH, NH_KV, HD are not a valid shape{why}")

    ok = _mask(pc.equal(table.column("status"), str(Status.OK)))
    times = _numbers(table, "time_ms", math.nan)
    with np.errstate(invalid="ignore"):
        drop(
            ok & ~(np.isfinite(times) & (times > 0)),
            "status ok but time_ms is not a finite positive number",
            table.column("time_ms"),
        )
        drop(
            ok & (times < _floor_ms(table, dims)),
            f"status ok but time_ms is below what the shape's bytes take at {PEAK_MARGIN:g}x the "
            f"device's peak bandwidth ({MAX_BANDWIDTH / 1e12:.0f} TB/s where its peak is not known)",
            table.column("time_ms"),
        )
        for name in POSITIVE_TIMES:
            values = _numbers(table, name, math.nan)
            drop(
                ~np.isnan(values) & ~(np.isfinite(values) & (values > 0)),
                f"{name} is not a finite positive number",
                table.column(name),
            )


def validate_table(
    table: pa.Table, families: Collection[str] | None = None
) -> tuple[pa.Table, dict[str, int]]:
    """The rows of `table` that the service, the selection rule and the dashboards can trust,
    and how many rows each reason dropped (a row counts under the first reason it fails):

    - every required column (non-nullable in TRIAL_SCHEMA) is set, NON_EMPTY_COLUMNS non-empty;
    - schema_version is one this code knows; gpu is a GPU label (results.schema.check_gpu_label);
    - op is one of variants.OPS; status one of results.schema.STATUSES, dtype one of
      variants.DTYPES, family one of its op's (for repkv_backward, `families` where given),
      l2 null or one of results.schema.L2_STATES;
    - params is a JSON object and config_key the key it makes in the row's family;
    - B, T, NH, NH_KV, HD make a variants.Shape (>= 1, <= MAX_DIM, NH divisible by NH_KV);
    - a row with status ok has a finite positive time, no shorter than the shape's bytes take
      at PEAK_MARGIN times the device's peak (results.peaks), or MAX_BANDWIDTH where unknown;
    - empty_launch_ms and copy_ms, where set, are finite and positive.
    """
    known_families = set(variants.FAMILIES if families is None else families)
    drop = _Dropper(table.num_rows)
    _check_required(table, drop)
    _check_names(table, drop, known_families)
    _check_config(table, drop)
    _check_numbers(table, drop)
    if drop.bad.any():
        table = table.filter(pa.array(~drop.bad))
    return table, drop.reasons
