"""The peers benchmark's rows: one per (shape, dtype, peer), its status, median time with
p20/p80, and the ratios `derive` adds (to the same-run device copy, achieved GB/s and the
fraction of the GPU's peak, to an empty kernel launch)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from tuner.peers.names import COPY_PEER, EMPTY_PEER, STATUS_OK
from variants import DType, Shape

ROW_COLUMNS = (
    "shape",
    "B",
    "T",
    "NH",
    "NH_KV",
    "HD",
    "dtype",
    "MB",
    "peer",
    "kind",
    "config",
    "status",
    "message",
    "time_ms",
    "p20_ms",
    "p80_ms",
    "reps",
    "compile_s",
    "graphs",
    "kernels",
    "match",
    "tuned_from",
    "ratio_to_copy",
    "gbps",
    "frac_peak",
    "ratio_to_empty",
    "device_us",
    "device_p20_us",
    "device_p80_us",
    "device_kernels",
)


def make_row(
    shape: Shape,
    dtype: DType,
    peer: str,
    kind: str,
    status: str = STATUS_OK,
    message: str = "",
    time_ms: float | None = None,
    p20_ms: float | None = None,
    p80_ms: float | None = None,
    reps: int | None = None,
    config: str = "",
    **extra: Any,
) -> dict[str, Any]:
    """One (shape, dtype, peer) row; a failed or skipped peer has no times."""
    ok = status == STATUS_OK
    nan = float("nan")
    row: dict[str, Any] = {
        "shape": shape.key,
        **shape.as_dict(),
        "dtype": dtype.name,
        "MB": shape.bytes_moved(dtype) / 1e6,
        "peer": peer,
        "kind": kind,
        "config": config,
        "status": status,
        "message": message,
        "time_ms": float(time_ms) if ok and time_ms is not None else nan,
        "p20_ms": float(p20_ms) if ok and p20_ms is not None else nan,
        "p80_ms": float(p80_ms) if ok and p80_ms is not None else nan,
        "reps": int(reps) if ok and reps is not None else 0,
        "compile_s": nan,
        "graphs": -1,
        "kernels": -1,
        "match": "",  # tuned rows: exact, partial or nearest
        "tuned_from": "",  # tuned rows: the tuned shape and dtype the configuration comes from
        # the device-time pass (tuner.runners.kernel_trace), where it profiled this peer
        "device_us": nan,
        "device_p20_us": nan,
        "device_p80_us": nan,
        "device_kernels": -1,
    }
    row.update(extra)
    return row


def derive(frame: pd.DataFrame, peak_gbps: float | None) -> pd.DataFrame:
    """Add, per row: ratio_to_copy (time over the same shape and dtype's copy), gbps (bytes
    moved over time), frac_peak (gbps over the peak; NaN when unknown) and ratio_to_empty
    (time over the same pair's empty kernel launch)."""
    frame = frame.copy()
    keys = ["shape", "dtype"]

    def reference_time(peer: str) -> pd.Series:
        ref = frame[(frame["peer"] == peer) & (frame["status"] == STATUS_OK)][[*keys, "time_ms"]]
        ref = ref.drop_duplicates(keys).rename(columns={"time_ms": "_ref"})
        return frame[keys].merge(ref, on=keys, how="left")["_ref"].to_numpy()

    time_ms = frame["time_ms"].astype(float)
    frame["ratio_to_copy"] = time_ms / reference_time(COPY_PEER)
    frame["gbps"] = frame["MB"].astype(float) / time_ms  # MB per ms = GB/s
    frame["frac_peak"] = frame["gbps"] / peak_gbps if peak_gbps else float("nan")
    frame["ratio_to_empty"] = time_ms / reference_time(EMPTY_PEER)
    return frame
