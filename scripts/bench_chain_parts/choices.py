"""What the chain benchmark runs of this project's kernels: what the PyTorch op serves on this GPU
for an op, shape and dtype (`results.selection.select`: exact, else nearest; from another GPU's
tuning where this one has none, as the op borrows it), or the op's generic configuration where
nothing tuned serves (no GPU needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from variants import OPS, Config, DType, Shape, runs_on


def load_index(results: Path | None = None) -> Any:
    """The store's index (results.index.StoreIndex) over `results` (default: the user's results
    directory) and the bundled store."""
    from results.index import build_index
    from results.store import load_results, read_dirs

    return build_index(load_results(read_dirs(results))[0])


def served(
    index: Any, label: str, op_name: str, shape: Shape, dtype: DType, capability: int | None = None
) -> tuple[Config, str]:
    """(configuration, where it comes from) for op `op_name` at (shape, dtype) on GPU `label`,
    of compute capability `capability` (10*major + minor; None: any): another GPU's tuning
    where `label` has none, of a family this GPU runs (`repkv_tune.launcher` does the same)."""
    from results.selection import select

    choice = select(index.for_op(op_name), label, shape, dtype, other_gpus=True)
    if choice is not None and runs_on(choice.candidate.config, capability, OPS[op_name]):
        tuned_at = f"{choice.group.shape.key} {choice.group.dtype.name}"
        if choice.group.gpu != label:
            tuned_at += f" on {choice.group.gpu}"
        return choice.candidate.config, f"{choice.match}, tuned at {tuned_at}"
    from results.selection import generic_config

    config = generic_config(shape, dtype, OPS[op_name])
    return config, f"generic: nothing tuned in the store serves it on {label!r}"
