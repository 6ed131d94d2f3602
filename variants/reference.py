"""The reference repkv backward and the validator every kernel run goes through.

Both are written against an array module `xp` (numpy, or cupy for a float64 reference on the
GPU), so the same code checks small shapes on the CPU and large ones on the device.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from variants.dtypes import DType
from variants.shape import Shape

MAX_REPORTED = 10


def reference(dout: Any, shape: Shape, xp: Any = np) -> Any:
    """dinp in float64 from dout (any float array of shape.dout_numel elements)."""
    d = xp.asarray(dout, dtype=xp.float64).reshape(shape.B, shape.T, 3, shape.NH, shape.HD)
    kv_shape = (shape.B, shape.T, shape.NH_KV, shape.nrep, shape.HD)
    k = d[:, :, 1].reshape(kv_shape).sum(axis=3)
    v = d[:, :, 2].reshape(kv_shape).sum(axis=3)
    return xp.concatenate([d[:, :, 0], k, v], axis=2)


def decode(stored: Any, dtype: DType, xp: Any = np) -> Any:
    """The device's storage array (bf16 kept as uint16 bits) -> float64 values."""
    if dtype.name == "bf16":
        widened = stored.astype(xp.uint32) << xp.uint32(16)
        return widened.view(xp.float32).astype(xp.float64)
    return stored.astype(xp.float64)


def encode(values: Any, dtype: DType, xp: Any = np) -> Any:
    """float32 values -> the storage array of dtype (bf16 rounded to nearest even)."""
    values = values.astype(xp.float32)
    if dtype.name == "fp32":
        return values
    if dtype.name == "fp16":
        return values.astype(xp.float16)
    bits = values.view(xp.uint32)
    rounding = ((bits >> xp.uint32(16)) & xp.uint32(1)) + xp.uint32(0x7FFF)
    return ((bits + rounding) >> xp.uint32(16)).astype(xp.uint16)


def nan_bits(dtype: DType) -> int:
    """The quiet-NaN bit pattern used to poison outputs before a launch."""
    return {"fp32": 0x7FC00000, "fp16": 0x7E00, "bf16": 0x7FC0}[dtype.name]


def random_input(shape: Shape, dtype: DType, xp: Any = np, seed: int | None = None) -> Any:
    """Fresh standard-normal dout in dtype's storage (never zeros)."""
    if xp is np:
        values = np.random.default_rng(seed).standard_normal(shape.dout_numel, dtype=np.float32)
    else:
        values = xp.random.RandomState(seed).standard_normal(shape.dout_numel, dtype=xp.float32)
    return encode(values, dtype, xp)


@dataclass(frozen=True)
class Mismatch:
    index: int  # flat index into dinp
    b: int
    t: int
    head: int  # dinp head: < NH query, then NH_KV key, then NH_KV value heads
    d: int
    expected: float
    got: float

    def __str__(self) -> str:
        return (
            f"dinp[b={self.b},t={self.t},head={self.head},d={self.d}]: "
            f"expected {self.expected:.6g}, got {self.got:.6g}"
        )


@dataclass(frozen=True)
class Validation:
    checked: int
    bad: int
    atol: float
    rtol: float
    first: list[Mismatch] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.bad == 0

    def summary(self) -> str:
        if self.ok:
            return f"all {self.checked} elements within atol={self.atol:.3g}, rtol={self.rtol:.3g}"
        lines = "; ".join(str(m) for m in self.first)
        tol = f"atol={self.atol:.3g}, rtol={self.rtol:.3g}"
        return f"{self.bad} of {self.checked} elements wrong ({tol}): {lines}"


def decode_index(index: int, shape: Shape) -> tuple[int, int, int, int]:
    """Flat dinp index -> (b, t, head, d)."""
    d = index % shape.HD
    rest = index // shape.HD
    head = rest % shape.heads_in
    rest //= shape.heads_in
    return rest // shape.T, rest % shape.T, head, d


def validate(
    got: Any, expected: Any, shape: Shape, dtype: DType, max_abs_input: float, xp: Any = np
) -> Validation:
    """NaN-aware comparison of every element: NaN, infinity or stale poison never passes."""
    got = xp.asarray(got, dtype=xp.float64).ravel()
    expected = xp.asarray(expected, dtype=xp.float64).ravel()
    if got.size != expected.size:
        raise ValueError(f"got {got.size} elements, expected {expected.size}")
    atol, rtol = dtype.tolerance(shape.nrep, max_abs_input)
    within = xp.abs(got - expected) <= atol + rtol * xp.abs(expected)  # False wherever NaN
    bad_mask = ~within
    bad = int(bad_mask.sum())
    first: list[Mismatch] = []
    if bad:
        where = xp.nonzero(bad_mask)[0][:MAX_REPORTED]
        where_host = [int(i) for i in (where.get() if hasattr(where, "get") else where)]
        for i in where_host:
            b, t, head, d = decode_index(i, shape)
            first.append(Mismatch(i, b, t, head, d, float(expected[i]), float(got[i])))
    return Validation(checked=int(got.size), bad=bad, atol=atol, rtol=rtol, first=first)


def validate_output(
    dinp: Any, dout: Any, shape: Shape, dtype: DType, xp: Any = np, chunk_elements: int = 2**26
) -> Validation:
    """Check a kernel's dinp (storage array) against the float64 reference of dout (storage),
    token chunk by token chunk so a shape of billions of elements needs little extra memory."""
    token_elements = 3 * shape.NH * shape.HD
    per_chunk = max(1, chunk_elements // token_elements)
    dout_rows = dout.reshape(shape.tokens, token_elements)
    dinp_rows = dinp.reshape(shape.tokens, shape.heads_in * shape.HD)
    checked = bad = 0
    first: list[Mismatch] = []
    atol = rtol = 0.0
    for start in range(0, shape.tokens, per_chunk):
        stop = min(start + per_chunk, shape.tokens)
        part = Shape(1, stop - start, shape.NH, shape.NH_KV, shape.HD)
        values = decode(dout_rows[start:stop], dtype, xp)
        result = validate(
            decode(dinp_rows[start:stop], dtype, xp),
            reference(values, part, xp),
            part,
            dtype,
            float(xp.abs(values).max()),
            xp,
        )
        checked += result.checked
        bad += result.bad
        atol, rtol = max(atol, result.atol), result.rtol
        offset = start * shape.heads_in * shape.HD
        for m in result.first[: MAX_REPORTED - len(first)]:
            index = m.index + offset
            first.append(Mismatch(index, *decode_index(index, shape), m.expected, m.got))
    return Validation(checked=checked, bad=bad, atol=atol, rtol=rtol, first=first)
