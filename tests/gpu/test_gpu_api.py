"""On the GPU: the tuned kernel called from Python on CuPy arrays and torch tensors, with
the configuration chosen from the bundled results (exact and nearest shapes)."""

from __future__ import annotations

import pytest

from variants import DTYPES, Shape

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def repkv():
    from tuner.gpu.api import TunedRepkv

    return TunedRepkv()


@pytest.mark.parametrize("shape", [Shape(8, 1024, 32, 8, 128), Shape(2, 333, 32, 8, 96)], ids=str)
@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
def test_cupy_arrays(repkv, shape: Shape, dtype: str) -> None:
    import cupy as cp

    from variants.reference import random_input, validate_output

    dt = DTYPES[dtype]
    dout = random_input(shape, dt, cp, seed=5)
    dinp = repkv(dout, *shape.as_dict().values(), dtype="bf16" if dtype == "bf16" else None)
    assert dinp.shape == (shape.B, shape.T, shape.heads_in, shape.HD)
    result = validate_output(dinp, dout, shape, dt, cp)
    assert result.ok, result.summary()
    assert repkv.choice(shape, dt).match == ("exact" if shape.T == 1024 else "nearest")


def test_torch_bf16_tensor(repkv) -> None:
    torch = pytest.importorskip("torch")
    from tuner.gpu.torch_peers import fp32_sum_cat

    shape = Shape(4, 100, 28, 4, 128)
    dout = torch.randn(shape.B, shape.T, 3, shape.NH, shape.HD, device="cuda", dtype=torch.bfloat16)
    dinp = repkv(dout, *shape.as_dict().values())
    assert dinp.dtype == torch.bfloat16 and dinp.shape == (shape.B, shape.T, shape.heads_in, shape.HD)
    expected = fp32_sum_cat(dout, *shape.as_dict().values())
    torch.testing.assert_close(dinp.float(), expected.float(), rtol=2**-7, atol=1e-5)


def test_l2_fed_chooses_the_fed_winner_where_the_shape_was_tuned_fed() -> None:
    import cupy as cp

    from tuner.gpu.api import TunedRepkv
    from variants.reference import random_input, validate_output

    shape, bf16 = Shape(1, 512, 32, 8, 64), DTYPES["bf16"]
    cold, fed = TunedRepkv(), TunedRepkv(l2="fed")
    chosen = fed.choice(shape, bf16)
    assert chosen.group.l2 == "fed" and chosen.candidate.config != cold.choice(shape, bf16).candidate.config
    dout = random_input(shape, bf16, cp, seed=3)
    result = validate_output(fed(dout, *shape.as_dict().values(), dtype="bf16"), dout, shape, bf16, cp)
    assert result.ok, result.summary()
    with pytest.raises(ValueError, match="unknown L2 state"):
        TunedRepkv(l2="warm")
