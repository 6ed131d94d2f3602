"""Kernel variants of repkv backward: one `.cu` template and one descriptor per family.

Importing this package never imports cupy: the descriptors are plain Python. The code that
touches the device is `tuner/gpu/` (`tuner.gpu.api` calls a tuned kernel from Python).
"""

from __future__ import annotations

from variants import gather, naive, split, vec, warp_per_head
from variants.dtypes import DTYPES, DType, UnknownDType, get_dtype
from variants.family import (
    KERNEL_ARGUMENTS,
    Config,
    Family,
    InvalidConfig,
    Launch,
    Param,
)
from variants.shape import InvalidShape, Shape

FAMILIES: dict[str, Family] = {
    module.FAMILY.name: module.FAMILY for module in (naive, gather, vec, warp_per_head, split)
}

BASELINE = Config.of("naive", **naive.BASELINE_PARAMS)


class UnknownFamily(ValueError):
    """A family name outside FAMILIES."""


def get_family(name: str, registry: dict[str, Family] | None = None) -> Family:
    registry = FAMILIES if registry is None else registry
    try:
        return registry[name]
    except (KeyError, TypeError):
        raise UnknownFamily(
            f"unknown kernel family {name!r}; expected one of {', '.join(registry)}"
        ) from None


def valid_configs(shape: Shape, dtype: DType, families: dict[str, Family] | None = None) -> list[Config]:
    """Every configuration of every family that can serve (shape, dtype)."""
    registry = FAMILIES if families is None else families
    return [c for family in registry.values() for c in family.valid_configs(shape, dtype)]


__all__ = [
    "BASELINE",
    "DTYPES",
    "FAMILIES",
    "KERNEL_ARGUMENTS",
    "Config",
    "DType",
    "Family",
    "InvalidConfig",
    "InvalidShape",
    "Launch",
    "Param",
    "Shape",
    "UnknownDType",
    "UnknownFamily",
    "get_dtype",
    "get_family",
    "valid_configs",
]
