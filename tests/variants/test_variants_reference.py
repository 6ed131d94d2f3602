from __future__ import annotations

import numpy as np
import pytest

from variants import DTYPES, Shape
from variants.reference import (
    decode,
    decode_index,
    encode,
    nan_bits,
    random_input,
    reference,
    validate_output,
)


def loop_reference(dout: np.ndarray, s: Shape) -> np.ndarray:
    """The definition, written as llm.c's CPU loops."""
    d = dout.reshape(s.B, s.T, 3, s.NH, s.HD)
    out = np.zeros((s.B, s.T, s.heads_in, s.HD))
    for b in range(s.B):
        for t in range(s.T):
            for h in range(s.NH):
                out[b, t, h] = d[b, t, 0, h]
            for g in range(s.NH_KV):
                for r in range(s.nrep):
                    out[b, t, s.NH + g] += d[b, t, 1, g * s.nrep + r]
                    out[b, t, s.NH + s.NH_KV + g] += d[b, t, 2, g * s.nrep + r]
    return out


@pytest.mark.parametrize("shape", [Shape(2, 3, 8, 2, 4), Shape(1, 1, 4, 4, 3), Shape(3, 2, 6, 1, 5)], ids=str)
def test_reference_matches_the_loops(shape: Shape) -> None:
    dout = np.random.default_rng(0).standard_normal(shape.dout_numel)
    np.testing.assert_allclose(reference(dout, shape), loop_reference(dout, shape), rtol=1e-12)


def test_bf16_encoding_rounds_to_nearest_even() -> None:
    bf16 = DTYPES["bf16"]
    values = np.array([1.0, 1.0 + 2**-8, 1.0 + 3 * 2**-8, -2.5, 3.0e38], dtype=np.float32)
    decoded = decode(encode(values, bf16), bf16)
    assert decoded.tolist()[:4] == [1.0, 1.0, 1.0 + 2**-6, -2.5]
    assert abs(decoded[4] - 3.0e38) / 3.0e38 < 2**-8


@pytest.mark.parametrize("dtype", list(DTYPES.values()), ids=lambda d: d.name)
def test_validator_accepts_a_correct_output_and_inputs_are_not_zeros(dtype) -> None:
    shape = Shape(2, 5, 8, 2, 16)
    dout = random_input(shape, dtype, seed=1)
    assert np.count_nonzero(decode(dout, dtype)) == shape.dout_numel
    dinp = encode(reference(decode(dout, dtype), shape).astype(np.float32), dtype)
    result = validate_output(dinp, dout, shape, dtype)
    assert result.ok and result.checked == shape.dinp_numel


@pytest.mark.parametrize("dtype", list(DTYPES.values()), ids=lambda d: d.name)
def test_validator_catches_poison_wrong_values_and_reports_where(dtype) -> None:
    shape = Shape(2, 5, 8, 2, 16)
    dout = random_input(shape, dtype, seed=2)
    good = encode(reference(decode(dout, dtype), shape).astype(np.float32), dtype).ravel()

    stale = good.copy()
    stale.view(np.uint32 if dtype.itemsize == 4 else np.uint16)[77] = nan_bits(dtype)  # never written
    result = validate_output(stale, dout, shape, dtype)
    assert not result.ok and result.bad == 1
    assert result.first[0].index == 77
    assert (result.first[0].b, result.first[0].t, result.first[0].head, result.first[0].d) == decode_index(
        77, shape
    )
    assert "got nan" in result.summary()

    wrong = good.copy()
    k_head = shape.NH  # first K head of token (1, 4): an off-by-one replica sum
    flat = ((1 * shape.T + 4) * shape.heads_in + k_head) * shape.HD + 3
    wrong[flat] = encode(np.array([decode(wrong[flat : flat + 1], dtype)[0] + 0.5], np.float32), dtype)[0]
    result = validate_output(wrong, dout, shape, dtype, chunk_elements=64)  # many small chunks
    assert result.bad == 1
    m = result.first[0]
    assert (m.b, m.t, m.head, m.d) == (1, 4, k_head, 3)


def test_decode_index_round_trip() -> None:
    shape = Shape(3, 4, 8, 2, 5)
    seen = {decode_index(i, shape) for i in range(shape.dinp_numel)}
    assert len(seen) == shape.dinp_numel
