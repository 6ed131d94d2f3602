"""The one place a kernel is compiled for a GPU: CuPy's NVRTC, one RawModule per name
expression (and CuPy's disk cache across processes). The tuner's GPU worker and the PyTorch
operators both compile through here; cupy is imported only when this is called."""

from __future__ import annotations

from typing import Any

from variants.errors import RepkvTuneError
from variants.family import Family


class CompileError(RepkvTuneError, RuntimeError):
    """NVRTC rejected the kernel; the message holds the compiler's log."""


def compile_kernel(family: Family, expression: str) -> tuple[Any, Any]:
    """(module, function) of the family's kernel instantiated as `expression`, on the current
    device; CompileError with NVRTC's log if it does not compile. Keep the module alive as
    long as the function is used."""
    import cupy as cp

    try:
        module = cp.RawModule(
            code=family.source, options=family.compile_options, name_expressions=[expression]
        )
        return module, module.get_function(expression)
    except cp.cuda.compiler.CompileException as exc:
        raise CompileError(str(exc)) from exc
