"""The op as data: what one kernel being tuned reads, writes, moves and must compute.

An `Op` is everything the store, the tuner, the service, the header export and the PyTorch op
need to know about a kernel beyond its families: its tensors as functions of the shape, the
bytes it moves (for the copy ratio and bandwidth), its float64 reference, its tolerance, its
llm.c baseline and its families. Every op shares the shape (B, T, NH, NH_KV, HD) and the
dtypes; a kernel takes `(T* out, const T* in..., int B, int T, int NH, int NH_KV, int HD)`.

A new op is one module that builds an `Op` (its families beside it) and one line in
`variants.OPS`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from variants.dtypes import DType
from variants.errors import RepkvTuneError
from variants.family import Config, Family
from variants.shape import Shape

# (inputs in float64, one per `Op.inputs`, token-major ones sliced to the tokens at hand;
# the shape of those tokens as one sequence; the position of each token in its sequence;
# the array module) -> the output in float64, token-major
Reference = Callable[[Sequence[Any], Shape, Any, Any], Any]
# (dtype, shape, largest |input|) -> (atol, rtol)
Tolerance = Callable[[DType, Shape, float], tuple[float, float]]


class UnknownOp(RepkvTuneError, ValueError):
    """An op name outside variants.OPS."""


@dataclass(frozen=True)
class Operand:
    """One tensor of an op. `token_elements`: elements per token of a (B, T, ...) tensor;
    `fixed_elements`: the size of one that does not grow with B (freqs_cis is (T, HD))."""

    name: str
    layout: str
    token_elements: Callable[[Shape], int] | None = None
    fixed_elements: Callable[[Shape], int] | None = None

    def numel(self, shape: Shape) -> int:
        if self.token_elements is not None:
            return shape.tokens * self.token_elements(shape)
        assert self.fixed_elements is not None
        return self.fixed_elements(shape)

    @property
    def token_major(self) -> bool:
        return self.token_elements is not None


@dataclass(frozen=True)
class Op:
    name: str
    doc: str
    output: Operand
    inputs: tuple[Operand, ...]
    families: Mapping[str, Family]
    baseline: Config  # llm.c's kernel, the reference point of every result
    reference: Reference
    tolerance: Tolerance
    # inputs that are not drawn at random (freqs_cis): name -> (shape, xp) -> float values
    fixed_inputs: Mapping[str, Callable[[Shape, Any], Any]] = field(default_factory=dict)
    # what the baseline is, as tables name it: llm.c's own kernel, or (for a fused op, which
    # llm.c runs as two kernels) the op's one-element-a-thread kernel
    baseline_name: str = "llm.c"
    # where NH == NH_KV the output holds the input's bytes unchanged (nothing replicated or
    # summed): the header's entry point and the PyTorch op copy instead of launching a kernel
    copies_without_replicas: bool = False
    # the op sums each K/V head's replicas (the backward ops): at MQA (NH_KV = 1) one group sums
    # every query head's gradient, which GQA layouts do not tell how to serve (results.layout_rule)
    sums_replicas: bool = False
    # a rule of the op itself, which every family keeps (RoPE rotates pairs: HD must be even):
    # shape -> (the dimension it names, why none of its kernels serves the shape), or None
    shape_rule: Callable[[Shape], tuple[str, str] | None] | None = None

    def rejection(self, shape: Shape) -> tuple[str, str] | None:
        """(dimension, why) where no kernel of the op serves `shape` whatever its configuration
        (as `variants.shape.limit_problem` gives for every op), or None."""
        return self.shape_rule(shape) if self.shape_rule is not None else None

    @property
    def kernel_arguments(self) -> str:
        """The C parameter list every family of the op shares."""
        ins = ", ".join(f"const T* {operand.name}" for operand in self.inputs)
        return f"(T* {self.output.name}, {ins}, int B, int T, int NH, int NH_KV, int HD)"

    def traffic(self, shape: Shape, dtype: DType) -> tuple[int, int]:
        """(bytes read, bytes written) at the least: each input read once, the output written once."""
        read = sum(o.numel(shape) for o in self.inputs)
        return read * dtype.itemsize, self.output.numel(shape) * dtype.itemsize

    def bytes_moved(self, shape: Shape, dtype: DType) -> int:
        """The fewest bytes any kernel must move (`traffic`, read and written together)."""
        return sum(self.traffic(shape, dtype))

    @property
    def layout_free_families(self) -> tuple[str, ...]:
        """Its families whose kernels read the head layout at run time (`Family.layout_free`)."""
        return tuple(name for name, family in self.families.items() if family.layout_free)

    def family(self, name: str) -> Family:
        from variants import UnknownFamily

        try:
            return self.families[name]
        except (KeyError, TypeError):
            raise UnknownFamily(
                f"op {self.name} has no kernel family {name!r}; expected one of {', '.join(self.families)}"
            ) from None


def get_op(name: str | None, registry: Mapping[str, Op]) -> Op:
    """The op of that name; UnknownOp listing the known ones otherwise."""
    try:
        return registry[name]  # type: ignore[index]
    except (KeyError, TypeError):
        raise UnknownOp(f"unknown op {name!r}; expected one of {', '.join(registry)}") from None
