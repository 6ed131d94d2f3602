"""The peers every tuned kernel is compared with in the same process: PyTorch eager and
torch.compile implementations of repkv backward, sharing the session's buffers by DLPack."""

from __future__ import annotations

import functools
from collections.abc import Callable

import cupy as cp

from variants import DType, Shape

TORCH_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def torch_repkv_backward(dout, B: int, T: int, NH: int, NH_KV: int, HD: int):
    """dout (B, T, 3, NH, HD) -> dinp (B, T, NH + 2*NH_KV, HD), summing in fp32."""
    import torch

    d = dout.view(B, T, 3, NH, HD)
    kv = d[:, :, 1:].reshape(B, T, 2, NH_KV, NH // NH_KV, HD).sum(dim=4, dtype=torch.float32)
    return torch.cat([d[:, :, 0], kv.to(dout.dtype).reshape(B, T, 2 * NH_KV, HD)], dim=2)


def as_torch(array: cp.ndarray, dtype: DType):
    import torch

    tensor = torch.from_dlpack(array)
    return tensor.view(getattr(torch, TORCH_DTYPES[dtype.name]))


def as_storage(tensor, dtype: DType) -> cp.ndarray:
    import torch

    if dtype.name == "bf16":
        tensor = tensor.view(torch.uint16)
    return cp.from_dlpack(tensor.contiguous().reshape(-1))


@functools.cache
def compiled_repkv_backward():  # -> the torch.compile'd function, one for every shape
    import torch

    torch._dynamo.config.cache_size_limit = 256  # never fall back to eager on recompiles
    return torch.compile(torch_repkv_backward, dynamic=True)


def torch_peers(shape: Shape, dtype: DType, dout: cp.ndarray) -> dict[str, Callable[[], object]]:
    """name -> a call computing dinp from dout with PyTorch (returns the tensor)."""
    source = as_torch(dout, dtype)
    dims = (shape.B, shape.T, shape.NH, shape.NH_KV, shape.HD)
    compiled = compiled_repkv_backward()
    return {
        "torch_eager": lambda: torch_repkv_backward(source, *dims),
        "torch_compile": lambda: compiled(source, *dims),
    }
