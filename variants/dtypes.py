"""The element types the kernels support, and how each one is judged."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


class UnknownDType(ValueError):
    """A dtype name outside DTYPES."""


@dataclass(frozen=True)
class DType:
    name: str
    ctype: str  # the CUDA C++ element type
    itemsize: int
    unit_roundoff: float  # 2**-(mantissa bits + 1): the relative error of one rounding

    def tolerance(self, nrep: int, max_abs_input: float) -> tuple[float, float]:
        """(atol, rtol) for a kernel that sums nrep values in fp32 and rounds once to this type.

        rtol: two roundings of the result; atol: the fp32 accumulation error of nrep terms,
        which matters where the sum cancels to near zero.
        """
        fp32_u = 2.0**-24
        atol = 2.0 * nrep * fp32_u * max(max_abs_input, 1.0) + 1e-30
        return atol, 2.0 * self.unit_roundoff

    def to_storage(self, values: np.ndarray) -> np.ndarray:
        """float values -> the array that holds this type's bits on the device."""
        values = np.asarray(values, dtype=np.float32)
        if self.name == "fp32":
            return values.copy()
        if self.name == "fp16":
            return values.astype(np.float16)
        return float32_to_bf16_bits(values)

    def from_storage(self, stored: np.ndarray) -> np.ndarray:
        """The inverse of to_storage, as float64."""
        if self.name == "bf16":
            return bf16_bits_to_float32(stored).astype(np.float64)
        return np.asarray(stored).astype(np.float64)

    @property
    def storage_numpy(self) -> np.dtype:
        return np.dtype({"fp32": np.float32, "fp16": np.float16, "bf16": np.uint16}[self.name])


def float32_to_bf16_bits(values: np.ndarray) -> np.ndarray:
    """Round float32 to bfloat16 (nearest, ties to even); returns the bits as uint16."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounding = ((bits >> 16) & 1) + np.uint32(0x7FFF)
    rounded = ((bits + rounding) >> 16).astype(np.uint16)
    nan = np.isnan(values)
    if nan.any():
        rounded[nan] = np.uint16(0x7FC0)
    return rounded


def bf16_bits_to_float32(bits: np.ndarray) -> np.ndarray:
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


DTYPES: dict[str, DType] = {
    "fp32": DType("fp32", "float", 4, 2.0**-24),
    "bf16": DType("bf16", "__nv_bfloat16", 2, 2.0**-8),
    "fp16": DType("fp16", "__half", 2, 2.0**-11),
}


def get_dtype(name: str) -> DType:
    try:
        return DTYPES[name]
    except (KeyError, TypeError):
        raise UnknownDType(
            f"unknown dtype {name!r}; expected one of {', '.join(DTYPES)}"
        ) from None
