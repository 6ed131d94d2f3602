"""What the peers benchmark prints at its end: the first calls' compiles, the failures, then
the tables (tuner.peers.tables.render)."""

from __future__ import annotations

import pandas as pd

from tuner.peers.names import STATUS_OK, STATUS_SKIPPED
from tuner.peers.summary import summary
from tuner.peers.tables import render

from .loop import PeerBench


def compile_report(frame: pd.DataFrame) -> str:
    """First calls per kind of peer: count, seconds (mean, max, total), graphs, kernels; rows
    by status."""
    lines = []
    compiled = frame[frame["compile_s"].notna()]
    for peer_kind, group in compiled.groupby(compiled["peer"].str.replace(r":.*", "", regex=True)):
        seconds = group["compile_s"]
        line = (
            f"  {peer_kind}: {len(group)} first calls, {seconds.mean():.1f}s mean, "
            f"{seconds.max():.1f}s max, {seconds.sum():.0f}s total"
        )
        graphs = group["graphs"][group["graphs"] >= 0]
        if len(graphs):
            line += f", graphs per compile {sorted(set(graphs.astype(int)))}"
        kernels = group["kernels"][group["kernels"] >= 0]
        if len(kernels):
            line += f", Inductor kernels per compile {sorted(set(kernels.astype(int)))}"
        lines.append(line)
    counts = frame["status"].value_counts().to_dict()
    lines.append("  rows by status: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return "\n".join(lines)


def report(bench: PeerBench) -> str:
    """What the run prints at its end: compiles, failures, then the tables (last)."""
    frame = bench.frame()
    lines = ["", "compiles:", compile_report(frame)]
    failed = frame[~frame["status"].isin([STATUS_OK, STATUS_SKIPPED])]
    for _, r in failed.iterrows():
        lines.append(f"  failed: {r['shape']} {r['dtype']} {r['peer']}: {r['status']}: {r['message'][:300]}")
    lines += ["", render(summary(frame))]
    return "\n".join(lines)
