"""Call the tuned kernel from Python.

    from tuner.gpu.api import TunedRepkv
    repkv = TunedRepkv()                       # this GPU's results: yours, then the bundled ones
    dinp = repkv(dout, B=8, T=1024, NH=32, NH_KV=8, HD=128)

`dout` is a contiguous CuPy array (float32 or float16; bf16 as uint16 bits with
dtype="bf16") or any DLPack tensor such as a torch.Tensor (float32, float16 or bfloat16);
the result is of the same kind. The configuration is the one the service would answer with:
this GPU's exact tuned shape, else its nearest tuned shape whose configuration serves this
shape (`results.selection.select`, with other GPUs' results when this GPU has none).
`TunedRepkv(l2="fed")` chooses as `GET /best?l2=fed` does: for dout just written by the kernel
before, as in a training step.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import cupy as cp

from results.index import StoreIndex, build_index
from results.schema import L2_COLD
from results.selection import Choice, select
from results.store import load_results, read_dirs
from tuner.gpu.kernels import Kernels
from tuner.gpu.session import read_identity
from tuner.gpus import default_label
from variants import FAMILIES, DType, Shape, get_dtype, runs_on
from variants.family import ALIGNMENT

log = logging.getLogger(__name__)

_DTYPE_OF_CUPY = {"float32": "fp32", "float16": "fp16"}
_DTYPE_OF_TORCH = {"torch.float32": "fp32", "torch.float16": "fp16", "torch.bfloat16": "bf16"}


class NoConfiguration(LookupError):
    """Nothing in the results store can serve this shape and dtype."""


class TunedRepkv:
    def __init__(self, results: Path | None = None, gpu: str | None = None, l2: str = L2_COLD):
        frame, _ = load_results(read_dirs(results))
        self.index: StoreIndex = build_index(frame).in_state(l2)  # ValueError for an unknown state
        self.device = cp.cuda.Device()
        self.identity = read_identity(self.device)
        self.gpu = gpu or default_label(self.identity.name)
        self.kernels = Kernels(FAMILIES)
        self._warned: set[tuple[Shape, str]] = set()

    def choice(self, shape: Shape, dtype: DType) -> Choice:
        found = select(self.index, self.gpu, shape, dtype, other_gpus=True)
        if found is not None and not runs_on(found.candidate.config, self.identity.compute_capability):
            found = None  # borrowed from a newer GPU
        if found is None:
            raise NoConfiguration(
                f"no tuned configuration can serve {shape} {dtype.name}; run python -m tuner"
            )
        if found.group.gpu != self.gpu and (shape, dtype.name) not in self._warned:
            self._warned.add((shape, dtype.name))
            log.warning("no results for %s; using %s's configuration", self.gpu, found.group.gpu)
        return found

    def __call__(
        self, dout: Any, B: int, T: int, NH: int, NH_KV: int, HD: int, dtype: str | None = None
    ) -> Any:
        shape = Shape(B, T, NH, NH_KV, HD)
        is_torch = type(dout).__module__.startswith("torch")
        if is_torch:
            import torch

            name = dtype or _DTYPE_OF_TORCH.get(str(dout.dtype))
            source = cp.from_dlpack(dout.view(torch.int16) if name == "bf16" else dout)
        else:
            source = cp.asarray(dout)
            name = dtype or _DTYPE_OF_CUPY.get(str(source.dtype))
        if name is None:
            raise TypeError(f"unsupported element type {dout.dtype}; use float32, float16 or bfloat16")
        dt = get_dtype(name)
        if source.size != shape.dout_numel or not source.flags.c_contiguous:
            raise ValueError(f"dout must be a contiguous array of {shape.dout_numel} elements for {shape}")
        if source.data.ptr % ALIGNMENT:  # a view at an odd offset: 16-byte loads would fault
            source = source.copy()
        dinp = cp.empty((B, T, shape.heads_in, HD), dtype=source.dtype)
        config = self.choice(shape, dt).candidate.config
        self.kernels.launcher(shape, dt, config, self.identity.sm_count, dinp, source)()
        if not is_torch:
            return dinp
        out = torch.from_dlpack(dinp)
        return out.view(torch.bfloat16) if name == "bf16" else out
