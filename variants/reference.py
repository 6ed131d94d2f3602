"""The reference repkv backward, the dtype codecs, and the validator every kernel run of any op
goes through.

Both are written against an array module `xp` (numpy, or cupy for a float64 reference on the
GPU), so the same code checks small shapes on the CPU and large ones on the device.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from variants.dtypes import DType
from variants.shape import Shape

if TYPE_CHECKING:
    from variants.op import Op, Operand

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


def random_values(numel: int, dtype: DType, xp: Any = np, seed: int | None = None) -> Any:
    """`numel` fresh standard-normal values in dtype's storage (never zeros)."""
    if xp is np:
        values = np.random.default_rng(seed).standard_normal(numel, dtype=np.float32)
    else:
        values = xp.random.RandomState(seed).standard_normal(numel, dtype=xp.float32)
    return encode(values, dtype, xp)


def random_input(shape: Shape, dtype: DType, xp: Any = np, seed: int | None = None) -> Any:
    """Fresh standard-normal dout of repkv backward in dtype's storage (never zeros)."""
    return random_values(shape.dout_numel, dtype, xp, seed)


def op_inputs(op: Op, shape: Shape, dtype: DType, xp: Any = np, seed: int | None = None) -> tuple[Any, ...]:
    """The op's inputs in dtype's storage: standard-normal values, and the fixed ones
    (freqs_cis) as the op defines them."""
    made = []
    for i, operand in enumerate(op.inputs):
        values = fixed_input(op, operand.name, shape, dtype, xp)
        if values is None:
            values = random_values(operand.numel(shape), dtype, xp, None if seed is None else seed + i)
        made.append(values)
    return tuple(made)


def fixed_input(op: Op, name: str, shape: Shape, dtype: DType, xp: Any = np) -> Any | None:
    """The op's input `name` in dtype's storage where the op fixes its values (freqs_cis);
    None for an input drawn at random."""
    fixed = op.fixed_inputs.get(name)
    if fixed is None:
        return None
    return encode(xp.asarray(fixed(shape, xp), dtype=xp.float32).ravel(), dtype, xp)


@dataclass(frozen=True)
class Mismatch:
    index: int  # flat index into the output
    b: int
    t: int
    head: int  # the output's head within its token (dinp: < NH query, then NH_KV key, NH_KV value)
    d: int
    expected: float
    got: float
    tensor: str = "dinp"

    def __str__(self) -> str:
        return (
            f"{self.tensor}[b={self.b},t={self.t},head={self.head},d={self.d}]: "
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


def decode_index(index: int, shape: Shape, heads: int | None = None) -> tuple[int, int, int, int]:
    """Flat output index -> (b, t, head, d), for an output of `heads` heads of HD a token
    (default: dinp's NH + 2*NH_KV)."""
    heads = shape.heads_in if heads is None else heads
    d = index % shape.HD
    rest = index // shape.HD
    head = rest % heads
    rest //= heads
    return rest // shape.T, rest % shape.T, head, d


def validate(
    got: Any,
    expected: Any,
    shape: Shape,
    dtype: DType,
    max_abs_input: float,
    xp: Any = np,
    op: Op | None = None,
) -> Validation:
    """NaN-aware comparison of every element: NaN, infinity or stale poison never passes."""
    op = op or _default_op()
    got = xp.asarray(got, dtype=xp.float64).ravel()
    expected = xp.asarray(expected, dtype=xp.float64).ravel()
    if got.size != expected.size:
        raise ValueError(f"got {got.size} elements, expected {expected.size}")
    atol, rtol = op.tolerance(dtype, shape, max_abs_input)
    within = xp.abs(got - expected) <= atol + rtol * xp.abs(expected)  # False wherever NaN
    bad_mask = ~within
    bad = int(bad_mask.sum())
    first: list[Mismatch] = []
    if bad:
        heads = _heads(op, shape)
        where = xp.nonzero(bad_mask)[0][:MAX_REPORTED]
        where_host = [int(i) for i in (where.get() if hasattr(where, "get") else where)]
        for i in where_host:
            b, t, head, d = decode_index(i, shape, heads)
            first.append(Mismatch(i, b, t, head, d, float(expected[i]), float(got[i]), op.output.name))
    return Validation(checked=int(got.size), bad=bad, atol=atol, rtol=rtol, first=first)


def validate_output(
    out: Any,
    inputs: Any,
    shape: Shape,
    dtype: DType,
    xp: Any = np,
    chunk_elements: int = 2**26,
    op: Op | None = None,
) -> Validation:
    """Check a kernel's output (storage array) against the op's float64 reference of its
    inputs (storage arrays, one per `op.inputs`; one array alone for a one-input op), token
    chunk by token chunk so a shape of billions of elements needs little extra memory."""
    op = op or _default_op()
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    if len(inputs) != len(op.inputs):
        raise ValueError(f"{op.name} takes {len(op.inputs)} inputs, got {len(inputs)}")
    out_token = op.output.token_elements(shape)  # type: ignore[misc]
    per_chunk = max(1, chunk_elements // max(out_token, *(_token_elements(o, shape) for o in op.inputs)))
    rows = [
        x.reshape(shape.tokens, _token_elements(o, shape)) if o.token_major else x
        for o, x in zip(op.inputs, inputs, strict=True)
    ]
    whole = [None if o.token_major else decode(x, dtype, xp) for o, x in zip(op.inputs, rows, strict=True)]
    out_rows = out.reshape(shape.tokens, out_token)
    heads = _heads(op, shape)
    checked = bad = 0
    first: list[Mismatch] = []
    atol = rtol = 0.0
    for start in range(0, shape.tokens, per_chunk):
        stop = min(start + per_chunk, shape.tokens)
        part = Shape(1, stop - start, shape.NH, shape.NH_KV, shape.HD)
        values = [
            decode(x[start:stop], dtype, xp) if w is None else w for x, w in zip(rows, whole, strict=True)
        ]
        positions = xp.arange(start, stop) % shape.T
        largest = max(float(xp.abs(v).max()) for v in values)
        result = validate(
            decode(out_rows[start:stop], dtype, xp),
            op.reference(values, part, positions, xp),
            part,
            dtype,
            largest,
            xp,
            op,
        )
        checked += result.checked
        bad += result.bad
        atol, rtol = max(atol, result.atol), result.rtol
        offset = start * out_token
        for m in result.first[: MAX_REPORTED - len(first)]:
            index = m.index + offset
            first.append(Mismatch(index, *decode_index(index, shape, heads), m.expected, m.got, m.tensor))
    return Validation(checked=checked, bad=bad, atol=atol, rtol=rtol, first=first)


def _token_elements(operand: Operand, shape: Shape) -> int:
    return operand.token_elements(shape) if operand.token_elements is not None else 1


def _heads(op: Op, shape: Shape) -> int:
    return op.output.token_elements(shape) // shape.HD  # type: ignore[misc]


def _default_op() -> Op:
    from variants.repkv_backward import OP

    return OP
