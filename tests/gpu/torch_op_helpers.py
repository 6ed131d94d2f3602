"""What the PyTorch operators' GPU tests share (test_gpu_torch_op_*.py): shapes, dtypes, tolerances."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

# (B, T, NH, NH_KV, HD): the tuned seed shape, nrep 1, NH_KV 1, an untuned odd layout
SHAPES = [(8, 1024, 32, 8, 128), (2, 256, 8, 8, 64), (3, 100, 8, 1, 64), (1, 77, 12, 4, 72)]
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
TOLERANCE = {torch.float32: (1e-5, 1e-5), torch.bfloat16: (2e-2, 1.6e-2), torch.float16: (2e-3, 2e-3)}


def bundled_rows_gpu() -> bool:
    """Whether this CUDA device is the GPU the bundled rows were measured on (the H200): only
    there is a tuned shape served exactly; elsewhere the op races the configurations it borrows."""
    from tuner.run.gpus import label_matches

    return label_matches("h200", torch.cuda.get_device_name(0))
