"""Compiling and launching the variants with CuPy: one RawModule per name expression,
kept for the life of the process (and CuPy's disk cache across processes)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor

import cupy as cp
import numpy as np

from variants import Config, DType, Family, Shape
from variants.compile_cupy import CompileError, compile_kernel


class Kernels:
    def __init__(self, families: Mapping[str, Family]):
        self.families = families
        self._functions: dict[tuple[str, str], cp.RawKernel] = {}
        self._lock = threading.Lock()

    def function(self, family: Family, expression: str) -> cp.RawKernel:
        key = (family.source_hash, expression)
        function = self._functions.get(key)
        if function is None:
            _, function = compile_kernel(family, expression)  # the function keeps its module
            with self._lock:
                self._functions[key] = function
        return function

    def prepare(self, work: Iterable[tuple[Family, str]], threads: int = 8) -> int:
        """Compile many kernels ahead of their trials; returns how many failed (they fail
        again, and are recorded, when their trial comes)."""

        def one(item: tuple[Family, str]) -> bool:
            try:
                self.function(*item)
                return True
            except CompileError:
                return False

        with ThreadPoolExecutor(max_workers=threads) as pool:
            return sum(not ok for ok in pool.map(one, list(dict.fromkeys(work))))

    def launcher(
        self,
        shape: Shape,
        dtype: DType,
        config: Config,
        sm_count: int,
        out: cp.ndarray,
        *inputs: cp.ndarray,
    ) -> Callable[[], None]:
        """Compile (or fetch) the kernel and return a call that launches it once on (out,
        *inputs): (dinp, dout) for repkv backward."""
        family = self.families[config.family]
        function = self.function(family, family.name_expression(shape, dtype, config))
        launch = family.geometry(shape, dtype, config, sm_count)
        args = (out, *inputs, *(np.int32(v) for v in (shape.B, shape.T, shape.NH, shape.NH_KV, shape.HD)))
        grid, block = (launch.grid,), (launch.block,)

        def run() -> None:
            function(grid, block, args)

        return run
