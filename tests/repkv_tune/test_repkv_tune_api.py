"""The Python API's face: `import repkv_tune` exports the operators, and the retired
`tuner.runners.gpu.api.TunedRepkv` answers with the way to its successor."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


def test_the_package_exports_the_operators() -> None:
    import repkv_tune

    assert set(repkv_tune.__all__) >= {"repkv", "repkv_backward", "served", "record_races"}
    dout = torch.randn(2, 3, 3, 8, 4, dtype=torch.float64)
    torch.testing.assert_close(repkv_tune.repkv_backward(dout, 2), repkv_tune.reference_backward(dout, 2))


def test_the_retired_api_says_what_replaces_it() -> None:
    with pytest.raises(ImportError, match=r"repkv_tune\.repkv_backward\(dout, NH_KV\)"):
        from tuner.runners.gpu.api import TunedRepkv  # noqa: F401


def test_the_public_wrapper_compiles_with_fullgraph() -> None:
    """fullgraph=True over the wrapper itself (not torch.ops): CPU tensors take the operator."""
    import repkv_tune

    dout = torch.randn(2, 3, 3, 8, 4)
    compiled = torch.compile(lambda x: repkv_tune.repkv_backward(x, 2) * 2, fullgraph=True, backend="eager")
    torch.testing.assert_close(compiled(dout), 2 * repkv_tune.reference_backward(dout, 2))
