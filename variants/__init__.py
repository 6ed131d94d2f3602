"""The ops tuned (`OPS`: each an `Op`, variants/op.py) and their kernel variants: one `.cu`
template and one descriptor per family.

Importing this package never imports cupy: the descriptors are plain Python. The code that
touches the device is `tuner/runners/gpu/` (`repkv_tune` calls a tuned kernel from PyTorch).
"""

from __future__ import annotations

from variants.dtypes import DTYPES, DType, UnknownDType, get_dtype
from variants.errors import RepkvTuneError
from variants.family import (
    KERNEL_ARGUMENTS,
    Config,
    Family,
    GridTerm,
    InvalidConfig,
    Launch,
    Param,
)
from variants.op import Op, Operand, UnknownOp
from variants.repkv_backward import OP as REPKV_BACKWARD
from variants.repkv_forward import OP as REPKV_FORWARD
from variants.repkv_rope_backward import OP as REPKV_ROPE_BACKWARD
from variants.rope_repkv_forward import OP as ROPE_REPKV_FORWARD
from variants.shape import InvalidShape, Shape

# Every op tuned, by name. A new op: its module (an `Op` and its families), then one line here.
OPS: dict[str, Op] = {
    op.name: op for op in (REPKV_BACKWARD, REPKV_FORWARD, ROPE_REPKV_FORWARD, REPKV_ROPE_BACKWARD)
}
DEFAULT_OP = REPKV_BACKWARD.name

# repkv backward's families and baseline (the default op's: what callers that name no op use)
FAMILIES: dict[str, Family] = dict(REPKV_BACKWARD.families)
BASELINE = REPKV_BACKWARD.baseline


def get_op(name: str | None = None) -> Op:
    """The op of that name (default: repkv_backward); UnknownOp listing the known ones."""
    from variants.op import get_op as lookup

    return lookup(DEFAULT_OP if name is None else name, OPS)


def op_of(family: Family) -> Op:
    """The op a family instance belongs to (each belongs to one)."""
    for op in OPS.values():  # by class: a family sent to a worker process arrives as a copy
        if type(op.families.get(family.name)) is type(family):
            return op
    return REPKV_BACKWARD  # a family built outside the registry (tests): the default op's


class UnknownFamily(RepkvTuneError, ValueError):
    """A family name outside FAMILIES."""


def get_family(name: str, registry: dict[str, Family] | None = None) -> Family:
    registry = FAMILIES if registry is None else registry
    try:
        return registry[name]
    except (KeyError, TypeError):
        raise UnknownFamily(
            f"unknown kernel family {name!r}; expected one of {', '.join(registry)}"
        ) from None


def compute_capability_number(text: str | int | None) -> int | None:
    """ "9.0" or 90 -> 90; None for an unknown capability."""
    if isinstance(text, int):
        return text
    try:
        major, _, minor = str(text).partition(".")
        return int(major) * 10 + int(minor or 0)
    except ValueError:
        return None


def families_for(compute_capability: str | int | None) -> dict[str, Family]:
    """The families a GPU of this compute capability ("9.0" or 90) can run; every family when
    the capability is unknown."""
    number = compute_capability_number(compute_capability)
    return {n: f for n, f in FAMILIES.items() if number is None or f.min_compute_capability <= number}


def runs_on(config: Config, compute_capability: str | int | None, op: Op | None = None) -> bool:
    """Whether a GPU of this compute capability ("9.0" or 90; None: unknown, any) can run the
    configuration's family of `op` (default repkv_backward); False for a family `op` lacks."""
    family = (FAMILIES if op is None else op.families).get(config.family)
    number = compute_capability_number(compute_capability)
    return family is not None and (number is None or family.min_compute_capability <= number)


def valid_configs(shape: Shape, dtype: DType, families: dict[str, Family] | None = None) -> list[Config]:
    """Every configuration of every family that can serve (shape, dtype)."""
    registry = FAMILIES if families is None else families
    return [c for family in registry.values() for c in family.valid_configs(shape, dtype)]


__all__ = [
    "BASELINE",
    "DEFAULT_OP",
    "DTYPES",
    "FAMILIES",
    "KERNEL_ARGUMENTS",
    "OPS",
    "Config",
    "DType",
    "Family",
    "GridTerm",
    "InvalidConfig",
    "InvalidShape",
    "Launch",
    "Op",
    "Operand",
    "Param",
    "Shape",
    "UnknownDType",
    "UnknownFamily",
    "UnknownOp",
    "families_for",
    "get_dtype",
    "get_family",
    "get_op",
    "op_of",
    "runs_on",
    "valid_configs",
]
