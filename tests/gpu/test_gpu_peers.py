"""tuner.runners.gpu.peers on a GPU: CuPy launches on the PyTorch stream it is handed."""

from __future__ import annotations

import warnings

import pytest

pytestmark = pytest.mark.gpu


def test_cupy_takes_a_torch_stream_without_the_deprecated_external_stream() -> None:
    import cupy as cp
    import torch

    from tuner.runners.gpu.peers import cupy_stream

    stream = torch.cuda.Stream()
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        handle = cupy_stream(stream)
    assert handle.ptr == stream.cuda_stream
    with handle:
        values = cp.arange(1 << 20, dtype=cp.float32)
        values *= 2
        assert cp.cuda.get_current_stream().ptr == stream.cuda_stream
    stream.synchronize()
    assert float(values[-1]) == 2.0 * ((1 << 20) - 1)
