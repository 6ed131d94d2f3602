"""The peers benchmark's GPU-free half (no cupy, torch or triton here), so that it is tested
on any machine: everything of `scripts/bench_kernels.py` that needs no GPU, gathered from the
modules that hold it, under the one name its tests import (`from tuner import peer_bench`):

- tuner.peers.names: the shapes, peer groups, kinds of row, peer names and statuses;
- tuner.peers.plan: the plan, its time estimate (`estimate`, `describe`) and the budget;
- tuner.peers.rows: a row per (shape, dtype, peer) (`make_row`) and the ratios `derive`
  adds (to the same-run device copy, achieved GB/s and the fraction of the GPU's peak, to an
  empty kernel launch);
- tuner.peers.summary: `summary`, one line per shape and dtype;
- tuner.peers.tables: `markdown`, any of these frames as a table, and `render`, the
  tables a run prints last.
"""

from __future__ import annotations

from tuner.peers.names import (
    BENCH_SHAPES,
    CEILING,
    COMPILED,
    COPY_PEER,
    DEVICE_CALLS,
    DEVICE_PEERS,
    EAGER,
    EMPTY_PEER,
    H2H_PREFIX,
    H2H_ROUNDS,
    HEAD_TO_HEAD,
    LAUNCH,
    LLMC,
    LLMC_SEED,
    LLMC_SEED_BLOCK,
    PEER_GROUPS,
    PEER_KINDS,
    QUICK_DTYPES,
    QUICK_SHAPES,
    SMALL_SHAPES,
    STATUS_OK,
    STATUS_SKIPPED,
    TRITON,
    TRITON_PEER,
    TUNED,
    TUNED_PEER,
    compile_peer,
    eager_peer,
    head_to_head_peer,
    llmc_peer,
)
from tuner.peers.plan import (
    Budget,
    Costs,
    Estimate,
    Plan,
    describe,
    estimate,
    triton_layouts,
)
from tuner.peers.rows import (
    ROW_COLUMNS,
    derive,
    make_row,
)
from tuner.peers.summary import (
    device_summary,
    summary,
)
from tuner.peers.tables import (
    BANDWIDTH_COLUMNS,
    DEVICE_COLUMNS,
    MAIN_COLUMNS,
    fmt,
    markdown,
    render,
)

# the names its tests import from here (tests/tuner/test_peer_bench.py)
__all__ = [
    "BANDWIDTH_COLUMNS",
    "BENCH_SHAPES",
    "CEILING",
    "COMPILED",
    "COPY_PEER",
    "DEVICE_CALLS",
    "DEVICE_COLUMNS",
    "DEVICE_PEERS",
    "EAGER",
    "EMPTY_PEER",
    "H2H_PREFIX",
    "H2H_ROUNDS",
    "HEAD_TO_HEAD",
    "LAUNCH",
    "LLMC",
    "LLMC_SEED",
    "LLMC_SEED_BLOCK",
    "MAIN_COLUMNS",
    "PEER_GROUPS",
    "PEER_KINDS",
    "QUICK_DTYPES",
    "QUICK_SHAPES",
    "ROW_COLUMNS",
    "SMALL_SHAPES",
    "STATUS_OK",
    "STATUS_SKIPPED",
    "TRITON",
    "TRITON_PEER",
    "TUNED",
    "TUNED_PEER",
    "Budget",
    "Costs",
    "Estimate",
    "Plan",
    "compile_peer",
    "derive",
    "describe",
    "device_summary",
    "eager_peer",
    "estimate",
    "fmt",
    "head_to_head_peer",
    "llmc_peer",
    "make_row",
    "markdown",
    "render",
    "summary",
    "triton_layouts",
]
