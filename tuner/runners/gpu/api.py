"""Retired: `tuner.runners.gpu.api.TunedRepkv`, the first Python API (CuPy arrays, about 120 µs of CPU
per call, no CUDA graph capture). Its successor is the PyTorch operator:

    import repkv_tune
    dinp = repkv_tune.repkv_backward(dout, NH_KV)   # dout (B, T, 3, NH, HD), a CUDA tensor

the same tuned configuration, about 10 µs of CPU per call, and it captures in CUDA graphs. A
CuPy array reaches it through `torch.from_dlpack`. Importing the old name raises an ImportError
that says this, rather than a bare "no module".
"""

from __future__ import annotations

RETIRED = (
    "tuner.runners.gpu.api.{name} was retired; call repkv_tune.repkv_backward(dout, NH_KV) on a torch tensor "
    "(dout shaped (B, T, 3, NH, HD); a CuPy array converts with torch.from_dlpack)"
)


def __getattr__(name: str) -> object:
    if name in ("TunedRepkv", "NoConfiguration"):
        raise ImportError(RETIRED.format(name=name))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
