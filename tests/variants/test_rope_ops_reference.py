"""The fused RoPE ops on the CPU: float64 references against llm.c's unfused loops, validator, rounding."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from rope_ops_helpers import BF16, OPS, SHAPES

from variants.dtypes import DTYPES
from variants.reference import decode, encode, op_inputs, validate_output
from variants.repkv_rope_backward import OP as BACKWARD
from variants.repkv_rope_backward import llmc_chain_tolerance
from variants.rope_repkv_forward import OP as FORWARD
from variants.rope_repkv_forward.rope import THETA, freqs_cis
from variants.shape import Shape


# --- llm.c's unfused kernels, as loops (llmc/repkv.cuh, llmc/rope.cuh, branch llama3) -------------
def loop_freqs(s: Shape) -> np.ndarray:
    """precompute_freqs_cis(dim=HD, end=T, theta, use_scaled=0), scalar float32 as the C loop."""
    out = np.zeros((s.T, s.HD), dtype=np.float32)
    for i in range(s.HD // 2):
        freq = np.float32(1.0) / np.power(np.float32(THETA), np.float32(2 * i) / np.float32(s.HD))
        for t in range(s.T):
            angle = np.float32(t) * freq
            out[t, 2 * i], out[t, 2 * i + 1] = np.cos(angle), np.sin(angle)
    return out


def loop_repkv_forward(inp: np.ndarray, s: Shape) -> np.ndarray:
    x = inp.reshape(s.B, s.T, s.heads_in, s.HD)
    out = np.zeros((s.B, s.T, 3, s.NH, s.HD))
    for b in range(s.B):
        for t in range(s.T):
            for h in range(s.NH):
                out[b, t, 0, h] = x[b, t, h]
                out[b, t, 1, h] = x[b, t, s.NH + h // s.nrep]
                out[b, t, 2, h] = x[b, t, s.NH + s.NH_KV + h // s.nrep]
    return out


def loop_rope(qkv: np.ndarray, freqs: np.ndarray, s: Shape, backward: bool) -> np.ndarray:
    """rope_forward_kernel1 / rope_backward_inplace_kernel1 on (B, T, 3, NH, HD): q and k only."""
    out = qkv.copy()
    f = freqs.reshape(s.T, s.HD)
    for b in range(s.B):
        for t in range(s.T):
            for c in (0, 1):
                for h in range(s.NH):
                    for i in range(s.HD // 2):
                        cos, sin = f[t, 2 * i], f[t, 2 * i + 1]
                        x0, x1 = qkv[b, t, c, h, 2 * i], qkv[b, t, c, h, 2 * i + 1]
                        if backward:
                            out[b, t, c, h, 2 * i] = x0 * cos + x1 * sin
                            out[b, t, c, h, 2 * i + 1] = -x0 * sin + x1 * cos
                        else:
                            out[b, t, c, h, 2 * i] = x0 * cos - x1 * sin
                            out[b, t, c, h, 2 * i + 1] = x0 * sin + x1 * cos
    return out


def loop_repkv_backward(dout: np.ndarray, s: Shape) -> np.ndarray:
    d = dout.reshape(s.B, s.T, 3, s.NH, s.HD)
    out = np.zeros((s.B, s.T, s.heads_in, s.HD))
    for b in range(s.B):
        for t in range(s.T):
            for h in range(s.NH):
                out[b, t, h] = d[b, t, 0, h]
                out[b, t, s.NH + h // s.nrep] += d[b, t, 1, h]
                out[b, t, s.NH + s.NH_KV + h // s.nrep] += d[b, t, 2, h]
    return out


def positions(s: Shape) -> np.ndarray:
    return np.arange(s.tokens) % s.T


def stored_inputs(op, s: Shape, dtype=BF16, seed: int = 0) -> tuple[np.ndarray, ...]:
    return op_inputs(op, s, dtype, np, seed=seed)


# --- the references ---------------------------------------------------------------------------
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_freqs_cis_is_llmc_precompute(shape: Shape) -> None:
    got = np.asarray(freqs_cis(shape, np))
    assert got.dtype == np.float32 and got.shape == (shape.T, shape.HD)
    # numpy's vectorized and scalar float32 cos/sin may differ in the last bit
    np.testing.assert_allclose(got, loop_freqs(shape), rtol=0, atol=4e-7)
    np.testing.assert_array_equal(got[0], np.tile([1.0, 0.0], shape.HD // 2))  # position 0: identity
    np.testing.assert_allclose(got[:, 0], np.cos(np.arange(shape.T)), atol=1e-6)  # frequency 1 at i = 0


def test_freqs_cis_of_odd_hd_leaves_the_last_column_zero() -> None:
    f = np.asarray(freqs_cis(Shape(1, 4, 2, 1, 5), np))
    assert f.shape == (4, 5) and not f[:, 4].any()


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_forward_reference_is_repkv_then_rope(shape: Shape) -> None:
    inp, freqs = (decode(x, BF16) for x in stored_inputs(FORWARD, shape))
    chain = loop_rope(loop_repkv_forward(inp, shape), freqs, shape, backward=False)
    got = FORWARD.reference([inp, freqs], shape, positions(shape), np)
    assert got.shape == (shape.tokens, 3 * shape.NH * shape.HD)
    np.testing.assert_allclose(got.ravel(), chain.ravel(), rtol=1e-12, atol=1e-12)
    # v is copied, q and k are rotated (position 0 excepted)
    view = got.reshape(shape.B, shape.T, 3, shape.NH, shape.HD)
    np.testing.assert_array_equal(view[:, :, 2], loop_repkv_forward(inp, shape)[:, :, 2])


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_backward_reference_is_rope_then_repkv(shape: Shape) -> None:
    dout, freqs = (decode(x, BF16) for x in stored_inputs(BACKWARD, shape))
    chain = loop_repkv_backward(
        loop_rope(dout.reshape(shape.B, shape.T, 3, shape.NH, shape.HD), freqs, shape, backward=True), shape
    )
    got = BACKWARD.reference([dout, freqs], shape, positions(shape), np)
    assert got.shape == (shape.tokens, shape.heads_in * shape.HD)
    np.testing.assert_allclose(got.ravel(), chain.ravel(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_backward_is_the_transpose_of_forward(shape: Shape) -> None:
    """<forward(x), g> == <x, backward(g)>: the backward op is the adjoint of the forward op."""
    rng = np.random.default_rng(1)
    freqs = np.asarray(freqs_cis(shape, np), dtype=np.float64)
    x = rng.standard_normal(shape.tokens * shape.heads_in * shape.HD)
    g = rng.standard_normal(shape.tokens * 3 * shape.NH * shape.HD)
    fx = FORWARD.reference([x, freqs], shape, positions(shape), np)
    bg = BACKWARD.reference([g, freqs], shape, positions(shape), np)
    assert math.isclose(float(fx.ravel() @ g), float(x @ bg.ravel()), rel_tol=1e-12)


# --- the validator with each op ---------------------------------------------------------------
@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
@pytest.mark.parametrize("dtype", list(DTYPES.values()), ids=lambda d: d.name)
def test_validator_accepts_the_reference_and_reports_a_wrong_element(op, dtype) -> None:
    shape = Shape(3, 7, 6, 2, 10)
    inputs = stored_inputs(op, shape, dtype, seed=5)
    expected = op.reference([decode(x, dtype) for x in inputs], shape, positions(shape), np)
    out = encode(expected.ravel(), dtype)
    # chunks of 2 tokens cut the sequences of 7: the positions and freqs rows must follow
    for chunk in (2**26, 2 * op.output.token_elements(shape)):
        result = validate_output(out, inputs, shape, dtype, op=op, chunk_elements=chunk)
        assert result.ok, result.summary()
    heads = op.output.token_elements(shape) // shape.HD
    index = ((1 * shape.T + 5) * heads + shape.NH + 1) * shape.HD + 3  # b=1, t=5, a key head, d=3
    wrong = out.copy()
    wrong[index] = encode(np.array([decode(out[index : index + 1], dtype)[0] + 0.5]), dtype)[0]
    result = validate_output(wrong, inputs, shape, dtype, op=op, chunk_elements=2 * 6 * 10 * 6)
    assert result.bad == 1
    (m,) = result.first
    assert (m.index, m.b, m.t, m.head, m.d, m.tensor) == (index, 1, 5, shape.NH + 1, 3, op.output.name)


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_the_wrong_sign_or_position_does_not_pass(op) -> None:
    """The tolerance tells llm.c's rotation from its transpose and from a shifted position."""
    shape = Shape(2, 9, 4, 2, 64)
    inputs = stored_inputs(op, shape, BF16, seed=2)
    values = [decode(x, BF16) for x in inputs]
    flipped = values[1].reshape(shape.T, shape.HD).copy()
    flipped[:, 1::2] *= -1  # sin -> -sin: the other rotation
    for wrong in (
        op.reference([values[0], flipped], shape, positions(shape), np),
        op.reference(values, shape, (positions(shape) + 1) % shape.T, np),
    ):
        assert validate_output(encode(wrong.ravel(), BF16), inputs, shape, BF16, op=op).bad > 0


def test_llmc_double_rounding_exceeds_the_fused_error_in_bf16() -> None:
    """llm.c's backward chain rounds each rotated replica to bf16, then rounds the sum again.
    The fused kernel's one rounding meets the op's tolerance; the emulated chain meets only
    `llmc_chain_tolerance` (nrep * sqrt(2) * u_bf16 * max|dout| more), and misses the fused one
    where a group's gradients cancel."""
    shape = Shape(2, 33, 8, 2, 64)
    inputs = stored_inputs(BACKWARD, shape, BF16, seed=7)
    dout, freqs = (decode(x, BF16) for x in inputs)
    exact = BACKWARD.reference([dout, freqs], shape, positions(shape), np).ravel()
    fused = encode(exact, BF16)
    assert validate_output(fused, inputs, shape, BF16, op=BACKWARD).ok

    d = dout.reshape(shape.B, shape.T, 3, shape.NH, shape.HD)
    rotated = loop_rope(d, freqs, shape, backward=True)
    rotated_bf16 = decode(encode(rotated.ravel(), BF16), BF16)  # rope_backward_inplace's store
    chain = encode(loop_repkv_backward(rotated_bf16, shape).ravel(), BF16)  # repkv_backward's store

    fused_error = np.abs(decode(fused, BF16) - exact).max()
    chain_error = np.abs(decode(chain, BF16) - exact).max()
    assert chain_error > fused_error
    assert validate_output(chain, inputs, shape, BF16, op=BACKWARD).bad > 0
    llmc = dataclasses.replace(BACKWARD, tolerance=llmc_chain_tolerance)
    assert validate_output(chain, inputs, shape, BF16, op=llmc).ok
    # the stated llm.c atol in bf16: nrep * sqrt(2) * 2^-8 * max|dout|, next to the fused atol
    largest = float(np.abs(dout).max())
    atol_fused, _ = BACKWARD.tolerance(BF16, shape, largest)
    atol_llmc, rtol = llmc_chain_tolerance(BF16, shape, largest)
    assert atol_llmc - atol_fused == pytest.approx(shape.nrep * math.sqrt(2) * 2**-8 * max(largest, 1.0))
    assert atol_fused < 1e-3 * atol_llmc and rtol == 2 * 2**-8


def test_forward_chain_rounds_once_like_the_fused_kernel() -> None:
    """repkv_forward copies exactly, so llm.c's forward chain rounds each element once, as the
    fused kernel does: the emulated chain is the encoded reference, bit for bit."""
    shape = Shape(2, 9, 6, 2, 10)
    inputs = stored_inputs(FORWARD, shape, BF16, seed=3)
    inp, freqs = (decode(x, BF16) for x in inputs)
    chain = encode(loop_rope(loop_repkv_forward(inp, shape), freqs, shape, backward=False).ravel(), BF16)
    fused = encode(FORWARD.reference([inp, freqs], shape, positions(shape), np).ravel(), BF16)
    np.testing.assert_array_equal(chain, fused)
