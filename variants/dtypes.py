"""The element types the kernels support, and how each one is judged."""

from __future__ import annotations

from dataclasses import dataclass

from variants.errors import RepkvTuneError


class UnknownDType(RepkvTuneError, ValueError):
    """A dtype name outside DTYPES."""


@dataclass(frozen=True)
class DType:
    name: str
    ctype: str  # the CUDA C++ element type
    itemsize: int
    unit_roundoff: float  # 2**-(mantissa bits + 1): the relative error of one rounding

    def tolerance(self, nrep: int, max_abs_input: float) -> tuple[float, float]:
        """(atol, rtol) for a kernel that sums nrep values in fp32 and rounds once to this type.

        rtol: two roundings of the result in this type. atol: the worst fp32 accumulation
        error of nrep terms (each addition errs by at most u * |partial sum| <= u * nrep * max),
        which dominates where the sum cancels to near zero. A wrong element, a stale poison
        value or a NaN misses by far more than either.
        """
        fp32_u = 2.0**-24
        atol = nrep * nrep * fp32_u * max(max_abs_input, 1.0)
        return atol, 2.0 * self.unit_roundoff

    @property
    def storage(self) -> str:
        """The numpy/cupy dtype that holds this type's bits (bf16 as raw uint16)."""
        return {"fp32": "float32", "fp16": "float16", "bf16": "uint16"}[self.name]


DTYPES: dict[str, DType] = {
    "fp32": DType("fp32", "float", 4, 2.0**-24),
    "bf16": DType("bf16", "__nv_bfloat16", 2, 2.0**-8),
    "fp16": DType("fp16", "__half", 2, 2.0**-11),
}


def get_dtype(name: str) -> DType:
    """The dtype of that name, in any case ("BF16" is bf16)."""
    try:
        return DTYPES[name.lower()]
    except (KeyError, TypeError, AttributeError):
        raise UnknownDType(f"unknown dtype {name!r}; expected one of {', '.join(DTYPES)}") from None
