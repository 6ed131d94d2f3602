"""A compiled tuned kernel, ready to launch from PyTorch: its CUfunction, geometry and packed
argument block (`Launcher`), and how one is built for a configuration (`compile_launcher`).
The operators (`repkv_tune.ops`) and the first-call race (`repkv_tune.race`) both hold these."""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from variants import Config


@dataclass
class Launcher:
    """One (shape, dtype, device): the kernel's handle, its geometry and its argument block
    (dinp and dout pointers, then B, T, NH, NH_KV, HD) packed once; a call writes the two
    pointers and launches."""

    function: int  # CUfunction
    grid: int
    block: int
    config_key: str
    config: Config
    served_from: str  # "exact", "nearest", "raced", "generic"
    _keep: tuple  # the module and ctypes objects the addresses point into
    race: tuple[tuple[str, float], ...] = ()  # (configuration, median ms) when raced

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def __call__(self, dinp_ptr: int, dout_ptr: int, stream: int) -> None:
        from cupy.cuda import driver

        pointers, params = self._keep[1], self._keep[2]
        with self._lock:  # the argument block is shared; the launch copies it
            pointers[0].value = dinp_ptr
            pointers[1].value = dout_ptr
            driver.launchKernel(self.function, self.grid, 1, 1, self.block, 1, 1, 0, stream, params, 0)


def compile_launcher(shape, dtype, config, device: int, served: str) -> Launcher:
    """Compile config's kernel for (shape, dtype) on the device and pack its arguments."""
    import cupy as cp

    from variants import get_family

    family = get_family(config.family)
    expression = family.name_expression(shape, dtype, config)
    sm_count = torch.cuda.get_device_properties(device).multi_processor_count
    launch = family.geometry(shape, dtype, config, sm_count)
    with cp.cuda.Device(device):
        module = cp.RawModule(
            code=family.source, options=family.compile_options, name_expressions=[expression]
        )
        kernel = module.get_function(expression)
        function = int(kernel.kernel.ptr)  # CuPy loads the module on the current device
    pointers = (ctypes.c_void_p(0), ctypes.c_void_p(0))
    ints = [ctypes.c_int(v) for v in (shape.B, shape.T, shape.NH, shape.NH_KV, shape.HD)]
    slots = (ctypes.c_void_p * 7)(*(ctypes.addressof(a) for a in (*pointers, *ints)))
    return Launcher(
        function=function,
        grid=int(launch.grid),
        block=int(launch.block),
        config_key=config.key,
        config=config,
        served_from=served,
        _keep=(module, pointers, ctypes.addressof(slots), slots, ints, kernel),
    )
