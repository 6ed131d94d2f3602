"""The bridge between the session's CuPy buffers and the PyTorch/Triton peers (DLPack, no
copies, one stream): the peers benchmark hands dout to PyTorch this way and reads a peer's
output back."""

from __future__ import annotations

import cupy as cp

from variants import DType


def as_torch(array: cp.ndarray, dtype: DType):
    """A torch tensor sharing array's memory, of dtype's torch type (bf16 from its uint16 bits)."""
    import torch

    from tuner.runners.gpu.torch_peers import TORCH_DTYPES

    return torch.from_dlpack(array).view(TORCH_DTYPES[dtype.name])


def as_storage(tensor, dtype: DType) -> cp.ndarray:
    """A flat CuPy array of tensor's elements in dtype's storage type (bf16 as uint16 bits)."""
    import torch

    if dtype.name == "bf16":
        tensor = tensor.view(torch.uint16)
    return cp.from_dlpack(tensor.contiguous().reshape(-1))


def cupy_stream(stream) -> cp.cuda.Stream:
    """CuPy's handle on a PyTorch CUDA stream (any object with `__cuda_stream__`), not owning it:
    `Stream.from_external` where CuPy has it (14 on), `ExternalStream` (deprecated there) before."""
    from_external = getattr(cp.cuda.Stream, "from_external", None)
    if from_external is not None:
        return from_external(stream)
    return cp.cuda.ExternalStream(stream.cuda_stream, stream.device_index)


def share_stream_with_torch(device: int) -> None:
    """PyTorch on the device and on CuPy's current stream, so that torch peers, the session's
    kernels and the profiler's markers run in one order."""
    import torch

    torch.cuda.set_device(device)
    stream = cp.cuda.get_current_stream().ptr
    if torch.cuda.current_stream().cuda_stream != stream:
        torch.cuda.set_stream(torch.cuda.ExternalStream(stream))
