"""What every kernel family declares: its parameter space, constraints, launch geometry
and name expression. A family is a `.cu` template plus one instance of a `Family`
subclass beside it; `Family`'s docstring lists the hooks a family writes and the API
callers use."""

from __future__ import annotations

import abc
import functools
import hashlib
import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

from variants.dtypes import DType
from variants.errors import RepkvTuneError
from variants.shape import INT32_MAX, Shape

HERE = Path(__file__).resolve().parent
COMMON_HEADER = HERE / "common.cuh"
COMPILE_OPTIONS: tuple[str, ...] = ("-std=c++17",)
# The kernel signature every family shares, so one launch recipe fits them all.
KERNEL_ARGUMENTS = "(T* dinp, const T* dout, int B, int T, int NH, int NH_KV, int HD)"

BLOCK_SIZES = (32, 64, 128, 256, 512, 1024)
# The widest word a kernel loads or stores: dout and dinp must start on a multiple of it.
ALIGNMENT = 16
LOAD_HINTS = ("plain", "ldg", "ldcs")  # template code 0, 1, 2
STORE_HINTS = ("plain", "stcs")  # template code 0, 1


class InvalidConfig(RepkvTuneError, ValueError):
    """A configuration outside its family's space, or one its constraints reject."""


@dataclass(frozen=True)
class Param:
    name: str
    choices: tuple[Any, ...]
    doc: str
    # A parameter added to a family after rows were stored names the value those rows ran with,
    # so that they still read as points of the space (see `Family.completed`).
    earlier_rows: Any = None


@dataclass(frozen=True, order=True)
class Config:
    """One point of a family's space. `params` is sorted, so equal configs compare equal."""

    family: str
    params: tuple[tuple[str, Any], ...]

    @classmethod
    def of(cls, family: str, **params: Any) -> Config:
        return cls(family, tuple(sorted(params.items())))

    @property
    def values(self) -> dict[str, Any]:
        return dict(self.params)

    @functools.cached_property
    def key(self) -> str:  # computed once: every ranking and index reads it
        inner = ",".join(f"{k}={v}" for k, v in self.params)
        return f"{self.family}[{inner}]"


# CUDA's limit on gridDim.x.
MAX_GRID = 2**31 - 1


@dataclass(frozen=True)
class Launch:
    grid: int
    block: int


class GridTerm(NamedTuple):
    """One term of a grid that depends on the shape only through B*T: scale * ceil(B*T * a / b)."""

    scale: int
    a: int
    b: int

    def blocks(self, tokens: int) -> int:
        return self.scale * ceil_div(tokens * self.a, self.b)


def grid_size(terms: tuple[GridTerm, ...], tokens: int) -> int:
    """The grid that `terms` give at B*T = tokens."""
    return sum(term.blocks(tokens) for term in terms)


def vector_words(shape: Shape, dtype: DType, vec_bytes: int) -> int:
    """Words of vec_bytes in one head of HD elements (vector_reject checks they divide)."""
    return shape.HD * dtype.itemsize // vec_bytes


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def index_type(largest_index: int) -> str:
    """32-bit indexing where every index fits, 64-bit beyond (more integer work per element)."""
    return "int" if largest_index <= INT32_MAX else "long long"


class Family(abc.ABC):
    """A kernel family: one `.cu` template (after `common.cuh`) and its parameter space.

    What a family writes (the hooks; `p` is a checked parameter mapping, name -> value):

    - class attributes `name` (the template is `<template_dir>/<name>.cu`, by default
      `variants/<name>.cu`, the kernel `<kernel_prefix>_<name>`, by default `repkv_<name>`),
      `doc` (one line) and `params` (its `Param`s, the space's axes);
    - `template_args(shape, dtype, p)`: the template arguments, in order (abstract);
    - `launch(shape, dtype, p, sm_count)`: the grid and block (abstract);
    - `reject(shape, dtype, p)`: why the family cannot serve (shape, dtype) with p, or
      None (optional; by default every point of the space serves every shape);
    - `grid_terms(shape, dtype, p)`: the grid as data, `GridTerm`s (scale, a, b) with grid =
      sum(scale * ceil(B*T * a / b)), for a grid that depends on the shape only through B*T
      (optional; the llm.c header export serves such a family at any B*T of a tuned head
      layout, and leaves out rows of a family without it);
    - `min_compute_capability`: the oldest GPU it runs on, as 10*major + minor (optional;
      0, any; a GPU session leaves out the families its device is too old for);
    - `layout_free`: True where the kernel reads the head layout at run time, so one
      instantiation serves any layout (optional; the header's choices for untuned layouts);
    - `warp_heads`: True where a warp holds whole heads, so a head's words must divide 32
      (optional; the header checks it before launching a layout-free kernel);
    - `template_of`: another family's name, whose template and kernel this one instantiates
      with other template arguments (optional; warp_sum_runtime is warp_sum's);
    - `template_path`: override only for a template kept outside `variants/` (tests do).

    What callers use (derived, not overridden; the methods that take a `Config` check it
    first and raise `InvalidConfig` for a point outside the space, and `name_expression`
    and `geometry` also for one the family rejects for the shape):

    - `kernel`, `source`, `source_hash`, `compile_options`: what to compile;
    - `space()`: every point of the declared space;
    - `validate(config)`: the config's parameters, checked against the space;
    - `completed(params)`: a stored row's parameters, with those added since it was written;
    - `rejection(shape, dtype, config)`: the reason it cannot serve the shape, or None;
    - `valid_configs(shape, dtype)`: every point that serves the shape;
    - `name_expression(shape, dtype, config)`: the kernel's instantiation and identity;
    - `geometry(shape, dtype, config, sm_count)`: its `Launch`.
    """

    name: str
    doc: str
    params: tuple[Param, ...]
    min_compute_capability: int = 0
    # The kernel reads the head layout (NH, NH_KV, HD) at run time: one instantiation serves every
    # layout, so the exported header can launch it for a layout nobody tuned.
    layout_free: bool = False
    # A warp holds whole heads: a head's words must divide a warp's 32 lanes (the header checks it
    # for a layout at run time, as `reject` does here).
    warp_heads: bool = False
    # the kernel is `<kernel_prefix>_<template_of or name>`, its template `<template_dir>/<...>.cu`
    # (`template_of`: another family's template that this one instantiates otherwise)
    kernel_prefix: str = "repkv"
    template_dir: Path = HERE
    template_of: str | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A concrete family must declare its class attributes (abstract ones may leave them)."""
        super().__init_subclass__(**kwargs)
        abstract = any(getattr(getattr(cls, name, None), "__isabstractmethod__", False) for name in dir(cls))
        missing = [attr for attr in ("name", "doc", "params") if not hasattr(cls, attr)]
        if missing and not abstract:
            raise TypeError(f"family {cls.__name__} does not declare {', '.join(missing)}")

    # --- hooks ------------------------------------------------------------------------
    @abc.abstractmethod
    def template_args(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> list[str]:
        """The template arguments of `repkv_<name>` for (shape, dtype) with params p."""

    @abc.abstractmethod
    def launch(self, shape: Shape, dtype: DType, p: Mapping[str, Any], sm_count: int) -> Launch:
        """The grid and block for (shape, dtype) with params p on a GPU of sm_count SMs."""

    def reject(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> str | None:
        """Why this family cannot serve (shape, dtype) with params p, or None if it can."""
        return None

    def grid_terms(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> tuple[GridTerm, ...] | None:
        """`launch`'s grid as sum(scale * ceil(B*T * a / b)) over its terms, or None."""
        return None

    @property
    def template_path(self) -> Path:
        return self.template_dir / f"{self.template_of or self.name}.cu"

    # --- derived ----------------------------------------------------------------------
    @property
    def kernel(self) -> str:
        return f"{self.kernel_prefix}_{self.template_of or self.name}"

    @cached_property
    def source(self) -> str:
        """The whole compilation unit: the shared header, then this family's template."""
        return COMMON_HEADER.read_text() + "\n" + self.template_path.read_text()

    @cached_property
    def source_hash(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()[:16]

    @property
    def compile_options(self) -> tuple[str, ...]:
        return COMPILE_OPTIONS

    def space(self) -> Iterator[Config]:
        """Every point of the declared space, valid or not for any given shape."""
        names = [param.name for param in self.params]
        for combo in itertools.product(*(param.choices for param in self.params)):
            yield Config(self.name, tuple(sorted(zip(names, combo, strict=True))))

    @cached_property
    def _points(self) -> frozenset[Config]:
        return frozenset(self.space())

    def validate(self, config: Config) -> dict[str, Any]:
        """The config's parameters; InvalidConfig if it is not a point of this family's space."""
        try:
            if config in self._points:  # the common case, asked tens of thousands of times an export
                return config.values
        except TypeError:  # an unhashable value (a list out of a corrupt row): the checks below say which
            pass
        if config.family != self.name:
            raise InvalidConfig(f"config {config.key} does not belong to family {self.name}")
        values = config.values
        declared = {param.name: param for param in self.params}
        unknown = sorted(set(values) - set(declared))
        if unknown:
            raise InvalidConfig(
                f"{self.name} has no parameter {', '.join(unknown)}; it takes {', '.join(declared)}"
            )
        for name, param in declared.items():
            if name not in values:
                raise InvalidConfig(f"{config.key} lacks parameter {name}")
            if values[name] not in param.choices:
                raise InvalidConfig(
                    f"{self.name}.{name}={values[name]!r} is outside its choices {list(param.choices)}"
                )
        return values

    def completed(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """A stored row's parameters with those added to the family since (`earlier_rows`)."""
        added = {p.name: p.earlier_rows for p in self.params if p.earlier_rows is not None}
        return {**added, **params}

    def rejection(self, shape: Shape, dtype: DType, config: Config) -> str | None:
        """Why config cannot serve (shape, dtype), or None; InvalidConfig outside the space."""
        return self.reject(shape, dtype, self.validate(config))

    def valid_configs(self, shape: Shape, dtype: DType) -> list[Config]:
        return list(_valid_configs(self, shape, dtype))

    def neighbours(self, shape: Shape, dtype: DType, config: Config) -> list[Config]:
        """The valid configurations for (shape, dtype) one parameter away from `config` (a local
        search's next steps), in the space's order; InvalidConfig if `config` is not of this family."""
        values = self.validate(config)
        return [
            c
            for c in self.valid_configs(shape, dtype)
            if sum(value != values[name] for name, value in c.params) == 1
        ]

    def name_expression(self, shape: Shape, dtype: DType, config: Config) -> str:
        """`repkv_<name><args...>`: what the compiler instantiates, and the kernel's identity."""
        values = self._require(shape, dtype, config)
        return f"{self.kernel}<{', '.join(self.template_args(shape, dtype, values))}>"

    def geometry(self, shape: Shape, dtype: DType, config: Config, sm_count: int) -> Launch:
        return self.launch(shape, dtype, self._require(shape, dtype, config), sm_count)

    def _require(self, shape: Shape, dtype: DType, config: Config) -> dict[str, Any]:
        values = self.validate(config)
        reason = self.reject(shape, dtype, values)
        if reason:
            raise InvalidConfig(f"{config.key} cannot serve {shape} {dtype.name}: {reason}")
        return values


def hint_codes(p: Mapping[str, Any]) -> list[str]:
    return [str(LOAD_HINTS.index(p["load"])), str(STORE_HINTS.index(p["store"]))]


def vector_reject(shape: Shape, dtype: DType, vec_bytes: int) -> str | None:
    """The rules every vectorized family shares."""
    if vec_bytes < dtype.itemsize:
        return f"a {vec_bytes}-byte vector is narrower than one {dtype.name} element"
    width = vec_bytes // dtype.itemsize
    if shape.HD % width:
        return (
            f"HD={shape.HD} is not divisible by the vector width {width} ({vec_bytes} bytes of {dtype.name})"
        )
    return None


@functools.lru_cache(maxsize=4096)
def _valid_configs(family: Family, shape: Shape, dtype: DType) -> tuple[Config, ...]:
    """A family's valid configurations for (shape, dtype), worked out once: the study, the
    service and the tests ask for the same few again and again."""
    return tuple(c for c in family.space() if family.reject(shape, dtype, c.values) is None)
