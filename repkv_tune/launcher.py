"""Compiled tuned kernels, ready to launch from PyTorch, for every op of `variants.OPS`.

- `Launcher`: one kernel's CUfunction, geometry and packed argument block (the output pointer,
  then one per input in `op.inputs` order, then B, T, NH, NH_KV, HD: `Op.kernel_arguments`);
- `compile_launcher`: build one for a configuration of an op's family;
- `Launchers` (`LAUNCHERS`): the launchers per (op, shape, dtype, device), chosen from the
  results store's index for that op (`StoreIndex.for_op`), raced on shapes nobody tuned
  (`repkv_tune.race`).

The operators (`repkv_tune.ops`, `repkv_tune.rope`) and the first-call race hold these."""

from __future__ import annotations

import ctypes
import logging
import threading
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import torch

import variants
from repkv_tune.race import L2, RACE
from repkv_tune.race import race as _race
from results.schema import L2_STATES
from variants.compile_cupy import compile_kernel
from variants.family import ALIGNMENT

if TYPE_CHECKING:
    from variants import Config, DType, Op, Shape

log = logging.getLogger("repkv_tune.ops")

DEFAULT_OP = variants.DEFAULT_OP
# The dtypes the kernels are tuned in, by their variants name (float64 takes PyTorch's path).
DTYPE_NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


@dataclass
class Launcher:
    """One (op, shape, dtype, device): the kernel's handle, its geometry and its argument block
    (the output's and each input's pointer, then B, T, NH, NH_KV, HD) packed once; a call
    writes the pointers and launches."""

    function: int  # CUfunction
    grid: int
    block: int
    config_key: str
    config: Config
    served_from: str  # "exact", "partial", "nearest", "raced", "refined", "generic"
    _keep: tuple  # the module and ctypes objects the addresses point into
    race: tuple[tuple[str, float], ...] = ()  # (configuration, median ms) when raced
    op: str = DEFAULT_OP

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._launch_kernel = None  # cupy.cuda.driver.launchKernel, bound at the first call

    def __call__(self, *pointers: int, stream: int) -> None:
        """Launch on `stream` with `pointers`: the output's, then each input's (op.inputs order)."""
        launch_kernel = self._launch_kernel
        if launch_kernel is None:  # the import once, not per call (the CPU cost per call counts)
            from cupy.cuda import driver

            launch_kernel = self._launch_kernel = driver.launchKernel
        slots, params = self._keep[1], self._keep[2]
        with self._lock:  # the argument block is shared; the launch copies it
            for slot, pointer in zip(slots, pointers, strict=True):
                slot.value = pointer
            launch_kernel(self.function, self.grid, 1, 1, self.block, 1, 1, 0, stream, params, 0)


def compile_launcher(shape, dtype, config, device: int, served: str, op: Op | None = None) -> Launcher:
    """Compile config's kernel (a family of `op`, default repkv_backward) for (shape, dtype) on
    the device and pack its arguments."""
    cp = import_cupy()
    op = op or variants.get_op()
    family = op.family(config.family)
    expression = family.name_expression(shape, dtype, config)
    sm_count = torch.cuda.get_device_properties(device).multi_processor_count
    launch = family.geometry(shape, dtype, config, sm_count)
    with cp.cuda.Device(device):
        module, kernel = compile_kernel(family, expression)
        function = int(kernel.kernel.ptr)  # CuPy loads the module on the current device
    pointers = tuple(ctypes.c_void_p(0) for _ in range(1 + len(op.inputs)))
    ints = [ctypes.c_int(v) for v in (shape.B, shape.T, shape.NH, shape.NH_KV, shape.HD)]
    arguments = (*pointers, *ints)
    slots = (ctypes.c_void_p * len(arguments))(*(ctypes.addressof(a) for a in arguments))
    return Launcher(
        function=function,
        grid=int(launch.grid),
        block=int(launch.block),
        config_key=config.key,
        config=config,
        served_from=served,
        _keep=(module, pointers, ctypes.addressof(slots), slots, ints, kernel),
        op=op.name,
    )


def import_cupy():
    """cupy, or one ModuleNotFoundError naming the extra that installs it (not the bare
    `No module named 'cupy'`)."""
    try:
        import cupy
    except ModuleNotFoundError as exc:
        if exc.name != "cupy":
            raise
        from repkv_tune import TORCH_HINT

        raise ModuleNotFoundError(
            f"repkv_tune compiles its CUDA kernels with CuPy, which is not installed: {TORCH_HINT}",
            name="cupy",
        ) from None
    return cupy


class Launchers:
    """Launchers per (op, shape, dtype, device index), and the results index they are chosen
    from (loaded once, on the first CUDA call; each op served from `StoreIndex.for_op`)."""

    def __init__(self, results: Path | None = None) -> None:
        self.results = results
        self._by_key: dict[tuple, Launcher] = {}
        self._index = None
        self._lock = threading.Lock()

    def index(self):
        if self._index is None:
            from results.index import build_index
            from results.store import load_results, read_dirs

            frame, report = load_results(read_dirs(self.results))
            self._index = build_index(frame, report)
        return self._index

    def get(self, key: tuple, op: str = DEFAULT_OP) -> Launcher:
        """The launcher of `op` for key = ((B, T, NH, NH_KV, HD), dtype name, device index)."""
        full = key if op == DEFAULT_OP else (op, *key)
        launcher = self._by_key.get(full)
        if launcher is None:
            with self._lock:
                launcher = self._by_key.get(full) or self._build(op, *key)
                self._by_key[full] = launcher
        return launcher

    def _build(self, op_name: str, shape_tuple: tuple[int, ...], dtype_name: str, device: int) -> Launcher:
        from results.selection import generic_config, layout_tuned, shortlist
        from tuner.run.gpus import InvalidGpuLabel, default_label

        op = variants.get_op(op_name)
        shape, dtype = variants.Shape(*shape_tuple), variants.get_dtype(dtype_name)
        name = torch.cuda.get_device_name(device)
        try:
            gpu = default_label(name)
        except InvalidGpuLabel:
            gpu = ""
        # REPKV_L2's rankings where the shape was tuned so
        if L2 not in L2_STATES:
            raise ValueError(
                f"REPKV_L2={L2!r} names no L2 state: set {' or '.join(L2_STATES)}, or unset it (fed)"
            )
        index = self.index().for_op(op.name).in_state(L2)
        listed = shortlist(index, gpu, shape, dtype, other_gpus=True) if gpu else []
        major, minor = torch.cuda.get_device_capability(device)
        capability = 10 * major + minor  # another GPU's configurations may not run here
        listed = [c for c in listed if variants.runs_on(c.candidate.config, capability, op)]
        if not listed:
            config = generic_config(shape, dtype, op)
            log.warning(
                "nothing tuned serves %s %s %s on %s; using %s", op.name, shape, dtype.name, name, config.key
            )
            return compile_launcher(shape, dtype, config, device, "generic", op)
        if listed[0].group.gpu != gpu:
            log.warning(
                "no results for %s; using %s's configurations for %s", gpu, listed[0].group.gpu, shape
            )
        launchers = [compile_launcher(shape, dtype, c.candidate.config, device, c.match, op) for c in listed]
        if len(launchers) == 1 or not RACE or torch.cuda.is_current_stream_capturing():
            return launchers[0]
        refine = None
        if not layout_tuned(index.groups_of(listed[0].group.gpu), shape, dtype):
            refine = partial(_neighbours, shape, dtype, device, capability, op)
        return _race(launchers, op, shape, dtype, device, gpu, refine)


def _neighbours(
    shape: Shape, dtype: DType, device: int, capability: int, op: Op, winner: Launcher
) -> list[Launcher]:
    """The raced winner's one-parameter neighbours (`Family.neighbours`) that run here, compiled;
    one that fails to compile is logged and left out."""
    family = op.family(winner.config.family)
    compiled = []
    for config in family.neighbours(shape, dtype, winner.config):
        if not variants.runs_on(config, capability, op):
            continue
        try:
            compiled.append(compile_launcher(shape, dtype, config, device, "nearest", op))
        except Exception as exc:
            log.warning("not racing %s: %s: %s", config.key, type(exc).__name__, exc)
    return compiled


LAUNCHERS = Launchers()


def dtype_name(dtype: torch.dtype) -> str:
    """The tuned kernels' name of `dtype` (ValueError naming the three for any other)."""
    if dtype not in DTYPE_NAMES:
        tuned_dtypes = ", ".join(map(str, DTYPE_NAMES))
        raise ValueError(f"no tuned kernel serves {dtype}: the kernels are tuned for {tuned_dtypes}")
    return DTYPE_NAMES[dtype]


def tuned(tensor: torch.Tensor) -> bool:
    """Whether a tuned kernel serves the tensor (a CUDA tensor of a tuned dtype)."""
    return tensor.is_cuda and tensor.dtype in DTYPE_NAMES


def launcher_for(op: str, shape: tuple[int, ...], dtype: torch.dtype, device: int) -> Launcher | None:
    """The launcher of `op` for shape (B, T, NH, NH_KV, HD), None for an empty batch."""
    if not shape[0] * shape[1]:
        return None
    return LAUNCHERS.get((tuple(shape), dtype_name(dtype), device), op)


def aligned(tensor: torch.Tensor) -> torch.Tensor:
    """tensor, contiguous and starting on a 16-byte boundary (a copy where it is not: a view at
    an odd offset would make a 16-byte load fault)."""
    if not tensor.is_contiguous():
        tensor = tensor.contiguous()
    return tensor.clone() if tensor.data_ptr() % ALIGNMENT else tensor


def launch(launcher: Launcher | None, device: int, *tensors: torch.Tensor) -> None:
    """Launch on the device's current stream with the tensors' pointers (output first, then
    the inputs in op.inputs order); nothing for None (an empty batch)."""
    if launcher is None:
        return
    stream = torch._C._cuda_getCurrentRawStream(device)
    pointers = [t.data_ptr() for t in tensors]
    if device == torch._C._cuda_getDevice():
        launcher(*pointers, stream=stream)
    else:
        with torch.cuda.device(device):
            launcher(*pointers, stream=stream)
