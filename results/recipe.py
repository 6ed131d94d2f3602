"""What a caller needs to compile and launch one configuration for one shape, computed with
the current family descriptors (never with this project's code on the caller's side)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import variants
from results.index import Candidate
from variants import DType, Shape
from variants.family import MAX_GRID

# CUDA's limit on gridDim.x; a configuration that would need more blocks cannot launch.
GRID_LIMIT = MAX_GRID


@dataclass(frozen=True)
class Recipe:
    family: str
    params: dict[str, Any]
    config_key: str
    name_expression: str
    kernel_arguments: str
    compile_options: tuple[str, ...]
    source_hash: str  # of the family's current source: GET /kernels/{source_hash}
    grid: int
    block: int
    min_compute_capability: int  # 10*major + minor of the oldest GPU it runs on; 0: any
    measured_source_hash: str | None  # the source the time was measured with

    @property
    def source_current(self) -> bool:
        return self.measured_source_hash is None or self.measured_source_hash == self.source_hash


def build_recipe(candidate: Candidate, shape: Shape, dtype: DType) -> Recipe | str:
    """The launch recipe of candidate's configuration for (shape, dtype), or why it cannot serve."""
    family = candidate.family
    try:
        reason = family.rejection(shape, dtype, candidate.config)
        if reason:
            return reason
        name_expression = family.name_expression(shape, dtype, candidate.config)
        launch = family.geometry(shape, dtype, candidate.config, candidate.sm_count or 0)
    except (variants.InvalidConfig, ArithmeticError, ValueError, KeyError) as exc:
        return f"{candidate.config_key}: {exc}"
    if launch.grid > GRID_LIMIT:
        return f"{candidate.config_key} needs {launch.grid} blocks, beyond CUDA's grid limit {GRID_LIMIT}"
    return Recipe(
        family=family.name,
        params=dict(candidate.params),
        config_key=candidate.config_key,
        name_expression=name_expression,
        kernel_arguments=variants.op_of(family).kernel_arguments,
        compile_options=tuple(family.compile_options),
        source_hash=family.source_hash,
        grid=int(launch.grid),
        block=int(launch.block),
        min_compute_capability=family.min_compute_capability,
        measured_source_hash=candidate.source_hash,
    )
