"""Measuring trials on one GPU inside this process: fresh random input, NaN-poisoned output,
validation of every element before any timing, then CUDA-event timing."""

from __future__ import annotations

import platform
import socket
from collections.abc import Callable, Mapping
from dataclasses import replace

import cupy as cp

from results.schema import COPY_FASTEST, DEFAULT_HOLD_US, L2_COLD, Status
from tuner.runners.gpu.kernels import Kernels
from tuner.runners.gpu.timing import L2Flusher, Timing, empty_launch, time_device_copy, time_launches
from tuner.runners.runner import GpuIdentity, Measurement
from variants import DTYPES, FAMILIES, Config, DType, Family, InvalidConfig, Shape, get_op, op_of
from variants.compile_cupy import CompileError
from variants.errors import RepkvTuneError
from variants.reference import Validation, nan_bits, op_inputs, validate_output

# Errors after which the CUDA context is unusable: the worker must die and be replaced.
STICKY_ERRORS = (
    "ILLEGAL_ADDRESS",
    "IllegalAddress",
    "LAUNCH_FAILED",
    "LaunchFailure",
    "MISALIGNED",
    "Misaligned",
    "ILLEGAL_INSTRUCTION",
    "IllegalInstruction",
    "HARDWARE_STACK",
    "HardwareStack",
    "INVALID_PC",
    "InvalidPc",
    "ASSERT",
    "Assert",
    "LAUNCH_TIMEOUT",
)


class StickyCudaError(RepkvTuneError, RuntimeError):
    """The context is poisoned; the measurement says what happened."""

    def __init__(self, measurement: Measurement):
        super().__init__(measurement.message)
        self.measurement = measurement


def is_cuda_error(exc: BaseException) -> bool:
    return type(exc).__name__ in ("CUDADriverError", "CUDARuntimeError")


def read_identity(device: cp.cuda.Device) -> GpuIdentity:
    props = cp.cuda.runtime.getDeviceProperties(device.id)
    name = props["name"]
    driver = cp.cuda.runtime.driverGetVersion()
    runtime = cp.cuda.runtime.runtimeGetVersion()
    try:
        import pynvml

        pynvml.nvmlInit()
        driver_text = pynvml.nvmlSystemGetDriverVersion()
        driver_text = driver_text.decode() if isinstance(driver_text, bytes) else driver_text
    except Exception:
        driver_text = f"cuda {driver // 1000}.{driver % 1000 // 10}"
    return GpuIdentity(
        name=name.decode() if isinstance(name, bytes) else str(name),
        compute_capability=f"{props['major']}.{props['minor']}",
        sm_count=int(props["multiProcessorCount"]),
        driver_version=driver_text,
        cuda_version=f"{runtime // 1000}.{runtime % 1000 // 10}",
        cupy_version=cp.__version__,
        host=socket.gethostname() or platform.node(),
        pci_bus_id=_pci_bus_id(device, props),
    )


def _pci_bus_id(device: cp.cuda.Device, props: dict) -> str:
    try:
        return str(device.pci_bus_id)
    except Exception:
        pass
    try:
        return (
            f"{int(props['pciDomainID']):04x}:{int(props['pciBusID']):02x}:{int(props['pciDeviceID']):02x}.0"
        )
    except (KeyError, TypeError, ValueError):
        return ""


class DeviceSession:
    def __init__(
        self,
        device: int = 0,
        families: Mapping[str, Family] | None = None,
        reps: int = 50,
        hold_us: float = DEFAULT_HOLD_US,
        l2: str = L2_COLD,
    ):
        self.device = cp.cuda.Device(device)
        self.device.use()
        self.families = dict(FAMILIES if families is None else families)
        # the op these families serve: what the buffers hold and the output is checked against
        self.op = op_of(next(iter(self.families.values()))) if self.families else get_op()
        self.kernels = Kernels(self.families)
        self.flush = L2Flusher(self.device, hold_us, l2)
        self.identity = read_identity(self.device)
        self.reps = reps
        # ((shape, dtype name), the op's inputs, its output)
        self._buffers: tuple[tuple[Shape, str], tuple[cp.ndarray, ...], cp.ndarray] | None = None
        self.warm_up()
        self.identity = replace(
            self.identity,
            empty_launch_ms=self.empty_launch_ms(),
            hold_us=float(hold_us),
            l2=l2,
            copy_method=COPY_FASTEST,
        )

    def empty_launch_ms(self, rounds: int = 3) -> float:
        """An empty kernel timed as a trial is (L2 flushed before each call): the fastest of
        `rounds` medians."""
        launch = empty_launch()
        return min(time_launches(launch, self.flush, reps=self.reps).median_ms for _ in range(rounds))

    def warm_up(self) -> None:
        """Run every step of a trial once, with no kernel, for each dtype: CuPy compiles its
        own kernels (random numbers, conversions, the reference, the comparison, the flush)
        on first use, which on a cold cache takes seconds that must not count against the
        first trial's hang timeout."""
        shape = Shape(1, 3, 4, 2, 8)
        for dtype in DTYPES.values():
            self.run_checked(shape, dtype, lambda: None)  # every element fails: that path too
            time_launches(lambda: None, self.flush, reps=2, warmup=1)
        time_device_copy(4096, self.flush, reps=2)
        self.release()

    def buffers(self, shape: Shape, dtype: DType) -> tuple[cp.ndarray, cp.ndarray]:
        """(the op's first input, its output): (dout, dinp) for repkv backward."""
        inputs, out = self.op_buffers(shape, dtype)
        return inputs[0], out

    def op_buffers(self, shape: Shape, dtype: DType) -> tuple[tuple[cp.ndarray, ...], cp.ndarray]:
        """(the op's inputs, its output) for (shape, dtype), allocated once for a run of trials."""
        key = (shape, dtype.name)
        if self._buffers is None or self._buffers[0] != key:
            self._buffers = None
            cp.get_default_memory_pool().free_all_blocks()
            inputs = tuple(cp.empty(o.numel(shape), dtype=dtype.storage) for o in self.op.inputs)
            out = cp.empty(self.op.output.numel(shape), dtype=dtype.storage)
            self._buffers = (key, inputs, out)
        return self._buffers[1], self._buffers[2]

    def timing_flush(self) -> Callable[[], None]:
        """What runs before each timed call: the flush and hold, then, where the session's L2
        state is fed, a write of the current first input (dout: `L2Flusher.feeding`)."""
        return self.flush.feeding(self._buffers[1][0]) if self._buffers is not None else self.flush

    def release(self) -> None:
        self._buffers = None
        cp.get_default_memory_pool().free_all_blocks()

    def launcher(self, shape: Shape, dtype: DType, config: Config) -> Callable[[], None]:
        inputs, out = self.op_buffers(shape, dtype)
        return self.kernels.launcher(shape, dtype, config, self.identity.sm_count, out, *inputs)

    def run_checked(self, shape: Shape, dtype: DType, launch: Callable[[], None]) -> Validation:
        """Fresh random inputs (the op's fixed ones, freqs_cis, as it defines them), the output
        poisoned with NaN, one launch, every element compared."""
        inputs, out = self.op_buffers(shape, dtype)
        for buffer, values in zip(inputs, op_inputs(self.op, shape, dtype, cp), strict=True):
            buffer[...] = values
        poison = cp.uint32 if dtype.itemsize == 4 else cp.uint16
        out.view(poison).fill(nan_bits(dtype))
        launch()
        cp.cuda.get_current_stream().synchronize()
        return validate_output(out, inputs, shape, dtype, cp, op=self.op)

    def measure(
        self,
        shape: Shape,
        dtype: DType,
        config: Config,
        on_compiled: Callable[[], None] | None = None,
    ) -> Measurement:
        """One trial. Raises StickyCudaError when the context is lost (the caller must exit)."""
        family = self.families.get(config.family)
        if family is None:
            return Measurement.failed(Status.INVALID, f"unknown family {config.family!r}")
        try:
            family.geometry(shape, dtype, config, self.identity.sm_count)  # checks config, compiles nothing
        except InvalidConfig as exc:
            return Measurement.failed(Status.INVALID, str(exc))
        try:
            launch = self.launcher(shape, dtype, config)
        except CompileError as exc:
            return Measurement.failed(Status.COMPILE_ERROR, str(exc))
        if on_compiled:
            on_compiled()
        try:
            validation = self.run_checked(shape, dtype, launch)
            if not validation.ok:
                return Measurement.failed(Status.WRONG_RESULT, validation.summary())
            timing: Timing = time_launches(launch, self.timing_flush(), reps=self.reps)
        except Exception as exc:
            if not is_cuda_error(exc):
                raise
            message = f"{type(exc).__name__}: {exc}"
            if any(marker in message for marker in STICKY_ERRORS):
                raise StickyCudaError(Measurement.failed(Status.CRASH, message)) from exc
            return Measurement.failed(Status.LAUNCH_ERROR, message)
        return Measurement(
            status=Status.OK,
            time_ms=timing.median_ms,
            p20_ms=timing.p20_ms,
            p80_ms=timing.p80_ms,
            reps=timing.reps,
        )

    def copy_ms(self, shape: Shape, dtype: DType, rounds: int = 3) -> float:
        """A device copy of half the kernel's bytes (so as many are read and written): the
        fastest of `rounds` medians, each over fresh buffers. One median alone varied by up to
        10% between back-to-back studies of the same byte count on an H200; the fastest is
        the ceiling the kernels are held to."""
        self.release()
        nbytes = self.op.bytes_moved(shape, dtype) // 2
        return min(time_device_copy(nbytes, self.flush, reps=self.reps).median_ms for _ in range(rounds))
