"""The peers benchmark's summary: its rows turned into one line per shape and dtype (the tuned
kernel against the copy, the empty launch, the fastest peer, llm.c's kernel1, the head-to-head
race and the device times)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from tuner.peers.names import (
    COPY_PEER,
    EMPTY_PEER,
    H2H_PREFIX,
    HEAD_TO_HEAD,
    LLMC,
    LLMC_SEED,
    PEER_KINDS,
    STATUS_OK,
    STATUS_SKIPPED,
    TUNED_PEER,
    head_to_head_peer,
)


def _ok(group: pd.DataFrame) -> pd.DataFrame:
    return group[(group["status"] == STATUS_OK) & group["time_ms"].notna()]


def _time(group: pd.DataFrame, peer: str) -> float:
    hit = _ok(group)[_ok(group)["peer"] == peer]
    return float(hit["time_ms"].iloc[0]) if len(hit) else float("nan")


def _device_us(group: pd.DataFrame, peer: str) -> float:
    hit = group[(group["peer"] == peer) & group["device_us"].notna()]
    return float(hit["device_us"].iloc[0]) if len(hit) else float("nan")


def device_summary(group: pd.DataFrame) -> dict[str, Any]:
    """One pair's device times (the profiled pass; NaN where it did not run): the tuned kernel,
    the copy, the empty launch, and the profiled peer whose own work took least."""
    nan = float("nan")
    if "device_us" not in group:
        group = group.assign(device_us=nan, device_kernels=-1)
    tuned_us, copy_us, empty_us = (_device_us(group, p) for p in (TUNED_PEER, COPY_PEER, EMPTY_PEER))
    peers = group[group["kind"].isin(PEER_KINDS) & group["device_us"].notna()]
    best = peers.loc[peers["device_us"].idxmin()] if len(peers) else None
    return {
        "tuned_device_us": tuned_us,
        "copy_device_us": copy_us,
        "empty_device_us": empty_us,
        "tuned_device_x_copy": tuned_us / copy_us,
        "device_peer": str(best["peer"]) if best is not None else "",
        "device_peer_us": float(best["device_us"]) if best is not None else nan,
        "device_peer_kernels": int(best["device_kernels"]) if best is not None else -1,
        "device_vs_peer": float(best["device_us"]) / tuned_us if best is not None else nan,
    }


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Per shape and dtype (in the rows' order): the copy, the empty launch, the tuned kernel
    (time, x copy, GB/s), the fastest peer of PEER_KINDS, llm.c's kernel1 at block 128 and at
    its best block, and the speed-ups of the tuned kernel over each (peer time / tuned time:
    above 1 the tuned kernel is faster); where the run ended head to head, that race's ratio
    (h2h_vs_peer) too, and where it profiled the pair, the device times (`device_summary`)."""
    out = []
    for (shape, dtype), group in frame.groupby(["shape", "dtype"], sort=False):
        copy_ms, empty_ms, tuned_ms = (_time(group, p) for p in (COPY_PEER, EMPTY_PEER, TUNED_PEER))
        tuned = group[group["peer"] == TUNED_PEER]
        peers = _ok(group)[_ok(group)["kind"].isin(PEER_KINDS)]
        best = peers.loc[peers["time_ms"].idxmin()] if len(peers) else None
        llmc = peers[peers["kind"] == LLMC]
        llmc_best = llmc.loc[llmc["time_ms"].idxmin()] if len(llmc) else None
        seed_ms = _time(group, LLMC_SEED)
        h2h = _ok(group)[_ok(group)["kind"] == HEAD_TO_HEAD]
        h2h_tuned_ms = _time(group, head_to_head_peer(TUNED_PEER))
        h2h_peer = h2h[h2h["peer"] != head_to_head_peer(TUNED_PEER)]
        h2h_peer_ms = float(h2h_peer["time_ms"].iloc[0]) if len(h2h_peer) else float("nan")
        failed = group[~group["status"].isin([STATUS_OK, STATUS_SKIPPED])]
        failures = zip(failed["peer"], failed["status"], strict=True)
        skipped = group[group["status"] == STATUS_SKIPPED]
        mb = float(group["MB"].iloc[0])
        out.append(
            {
                "shape": shape,
                "dtype": dtype,
                "MB": mb,
                "copy_ms": copy_ms,
                "copy_gbps": mb / copy_ms,
                "empty_ms": empty_ms,
                "copy_x_empty": copy_ms / empty_ms,
                "tuned_ms": tuned_ms,
                "tuned_match": str(tuned["match"].iloc[0]) if len(tuned) else "",
                "tuned_config": str(tuned["config"].iloc[0]) if len(tuned) else "",
                "tuned_x_copy": tuned_ms / copy_ms,
                "tuned_gbps": mb / tuned_ms,
                "tuned_frac_peak": float(tuned["frac_peak"].iloc[0])
                if "frac_peak" in tuned and len(tuned)
                else float("nan"),
                "tuned_x_empty": tuned_ms / empty_ms,
                "fastest_peer": best["peer"] if best is not None else "",
                "fastest_peer_ms": float(best["time_ms"]) if best is not None else float("nan"),
                "vs_fastest_peer": (float(best["time_ms"]) / tuned_ms) if best is not None else float("nan"),
                "h2h_peer": str(h2h_peer["peer"].iloc[0]).removeprefix(H2H_PREFIX) if len(h2h_peer) else "",
                "h2h_tuned_ms": h2h_tuned_ms,
                "h2h_peer_ms": h2h_peer_ms,
                "h2h_vs_peer": h2h_peer_ms / h2h_tuned_ms,
                "llmc_seed_ms": seed_ms,
                "vs_llmc_seed": seed_ms / tuned_ms,
                "llmc_best_block": int(str(llmc_best["peer"]).rsplit("@", 1)[1])
                if llmc_best is not None
                else 0,
                "llmc_best_ms": float(llmc_best["time_ms"]) if llmc_best is not None else float("nan"),
                "vs_llmc_best": (float(llmc_best["time_ms"]) / tuned_ms)
                if llmc_best is not None
                else float("nan"),
                "failed": ", ".join(f"{peer} ({status})" for peer, status in failures),
                "skipped": len(skipped),
                "not_timed": len(failed) + len(skipped),
                **device_summary(_ok(group)),
            }
        )
    return pd.DataFrame(out)
