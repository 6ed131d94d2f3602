"""What the peers benchmark reads and compiles before it measures: the configuration this
GPU's results serve for each shape and dtype, and every CUDA kernel of the run, ahead."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from results.schema import L2_COLD
from variants import Config, DType, Shape
from variants.family import BLOCK_SIZES


def tuned_choices(
    results: Path | None, label: str, pairs: list[tuple[Shape, DType]], say, l2: str = L2_COLD
) -> dict:
    """(shape, dtype name) -> what the selection serves this GPU label from its own results in
    L2 state `l2` (exact, else nearest; None where nothing can serve). `results`: the directory
    read before the bundled store (default: the user's results directory)."""
    from results.index import build_index
    from results.selection import select
    from results.store import load_results, read_dirs

    dirs = read_dirs(results)
    index = build_index(load_results(dirs)[0]).in_state(l2)
    if label not in index.available_gpus():
        labels = ", ".join(index.available_gpus()) or "none"
        where = ", ".join(str(d) for d in dirs)
        say(f"no results for GPU label {label!r} in {where} (labels there: {labels}); pass --gpu")
    return {(shape, dtype.name): select(index, label, shape, dtype) for shape, dtype in pairs}


def prepare_kernels(
    session: Any, pairs: list[tuple[Shape, DType]], choices: dict, llmc: bool
) -> tuple[int, int]:
    """Compile every CUDA kernel of the run ahead, in parallel threads: (kernels, failures)."""
    work = []
    for shape, dtype in pairs:
        configs = [Config.of("naive", block=b) for b in BLOCK_SIZES] if llmc else []
        choice = choices.get((shape, dtype.name))
        if choice is not None:
            configs.append(choice.candidate.config)
        for config in configs:
            family = session.families[config.family]
            if family.rejection(shape, dtype, config) is None:
                work.append((family, family.name_expression(shape, dtype, config)))
    return len(set(work)), session.kernels.prepare(work)
