"""The tuned repkv backward as PyTorch operators, for attention kernels that need K and V
replicated to every query head (custom or older kernels, llm.c ports). Attention that
handles grouped-query itself (`F.scaled_dot_product_attention(..., enable_gqa=True)`) needs
no replication at all: see the README's step-time table before using this.

    from tuner.gpu.torch_op import repkv, repkv_backward
    qkv = proj(x).view(B, T, NH + 2 * NH_KV, HD)
    q, k, v = repkv(qkv, NH, NH_KV).unbind(2)       # (B, T, 3, NH, HD); backward is tuned
    dinp = repkv_backward(dout, NH_KV)               # the backward alone; out= to reuse memory

Both are `torch.library` custom ops (`torch.ops.repkv_tune.repkv`,
`torch.ops.repkv_tune.repkv_backward`, `torch.ops.repkv_tune.repkv_backward_out`) with fake
implementations, so `torch.compile(fullgraph=True)` traces through them. On a CUDA tensor
the backward launches the tuned kernel on `torch.cuda.current_stream()`, into memory from
PyTorch's caching allocator, so it runs inside CUDA graph capture. Its configuration is
`results.selection.select`'s for this GPU (exact, else nearest tuned shape; another GPU's
results only where this one has none; a generic configuration where nothing serves). The
kernel is compiled (CuPy, NVRTC) and its launch arguments packed on the first call per
(shape, dtype, device): make that call before capturing a graph, as PyTorch asks of every
captured operation. CPU and float64 tensors take a plain PyTorch path (for tests and
gradcheck). This module imports cupy only on a CUDA call; importing it needs torch alone.

A shape nobody tuned races its shortlist on the first call (`tuner.race` decides, from
CUDA-event timings taken here; REPKV_RACE=0 turns it off, and nothing races during graph
capture). With REPKV_RECORD=1 or `record_races()` the race's measurements are written as
trial rows of this process's own run (`tuner.race_record`), which later loads serve from.
"""

from __future__ import annotations

import ctypes
import logging
import os
import statistics
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from tuner.race import run_race

if TYPE_CHECKING:
    from tuner.race import RaceResult
    from tuner.race_record import RaceRecorder
    from tuner.runner import GpuIdentity
    from variants import Config, DType, Shape

log = logging.getLogger(__name__)

_DTYPE_NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}
ALIGNMENT = 16  # bytes: the widest word a kernel loads or stores


def _check(dout_shape: tuple[int, ...], NH_KV: int) -> tuple[int, int, int, int, int]:
    if len(dout_shape) != 5 or dout_shape[2] != 3:
        raise ValueError(f"dout must be (B, T, 3, NH, HD); got {tuple(dout_shape)}")
    B, T, _, NH, HD = dout_shape
    if NH_KV < 1 or NH % NH_KV:
        raise ValueError(f"NH={NH} is not divisible by NH_KV={NH_KV}")
    return B, T, NH, NH_KV, HD


def _check_qkv(qkv_shape: tuple[int, ...], NH: int, NH_KV: int) -> None:
    if NH_KV < 1 or NH < 1 or NH % NH_KV:
        raise ValueError(f"NH={NH} must be a positive multiple of NH_KV={NH_KV}")
    if len(qkv_shape) != 4 or qkv_shape[2] != NH + 2 * NH_KV:
        raise ValueError(f"qkv must be (B, T, NH + 2*NH_KV = {NH + 2 * NH_KV}, HD); got {tuple(qkv_shape)}")


# --- the reference path (CPU, float64) -------------------------------------------------------
def reference_backward(dout: torch.Tensor, NH_KV: int) -> torch.Tensor:
    """dinp[..., :NH] = dout[:, :, 0]; K and V: the sum over each head's nrep replicas."""
    B, T, NH, NH_KV, HD = _check(tuple(dout.shape), NH_KV)
    kv = dout[:, :, 1:].reshape(B, T, 2, NH_KV, NH // NH_KV, HD).sum(4)
    return torch.cat([dout[:, :, 0], kv.reshape(B, T, 2 * NH_KV, HD)], dim=2)


# --- the tuned CUDA path ---------------------------------------------------------------------
@dataclass
class _Launcher:
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


class _Launchers:
    """Launchers per (shape, dtype, device index), and the results index they are chosen
    from (loaded once, on the first CUDA call)."""

    def __init__(self, results: Path | None = None) -> None:
        self.results = results
        self._by_key: dict[tuple, _Launcher] = {}
        self._index = None
        self._lock = threading.Lock()

    def index(self):
        if self._index is None:
            from results.index import build_index
            from results.store import load_results, read_dirs

            frame, report = load_results(read_dirs(self.results))
            self._index = build_index(frame, report)
        return self._index

    def get(self, key: tuple) -> _Launcher:
        launcher = self._by_key.get(key)
        if launcher is None:
            with self._lock:
                launcher = self._by_key.get(key) or self._build(*key)
                self._by_key[key] = launcher
        return launcher

    def _build(self, shape_tuple: tuple[int, ...], dtype_name: str, device: int) -> _Launcher:
        from results.selection import generic_config, shortlist
        from tuner.gpus import InvalidGpuLabel, default_label
        from variants import Shape, get_dtype, runs_on

        shape, dtype = Shape(*shape_tuple), get_dtype(dtype_name)
        name = torch.cuda.get_device_name(device)
        try:
            gpu = default_label(name)
        except InvalidGpuLabel:
            gpu = ""
        listed = shortlist(self.index(), gpu, shape, dtype, other_gpus=True) if gpu else []
        major, minor = torch.cuda.get_device_capability(device)
        listed = [c for c in listed if runs_on(c.candidate.config, 10 * major + minor)]  # borrowed ones
        if not listed:
            config = generic_config(shape, dtype)
            log.warning("nothing tuned serves %s %s on %s; using %s", shape, dtype.name, name, config.key)
            return _compile(shape, dtype, config, device, "generic")
        if listed[0].group.gpu != gpu:
            log.warning(
                "no results for %s; using %s's configurations for %s", gpu, listed[0].group.gpu, shape
            )
        launchers = [_compile(shape, dtype, c.candidate.config, device, c.match) for c in listed]
        if len(launchers) == 1 or not RACE or torch.cuda.is_current_stream_capturing():
            return launchers[0]
        return _race(launchers, shape, dtype, device, gpu)


def _compile(shape, dtype, config, device: int, served: str) -> _Launcher:
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
    return _Launcher(
        function=function,
        grid=int(launch.grid),
        block=int(launch.block),
        config_key=config.key,
        config=config,
        served_from=served,
        _keep=(module, pointers, ctypes.addressof(slots), slots, ints, kernel),
    )


# Race the shortlisted configurations of an untuned shape on its first call (REPKV_RACE=0: no).
RACE = os.environ.get("REPKV_RACE", "1") != "0"
RACE_REPS = 7
COPY_ROUNDS = 3  # the device copy a recorded race is held to: the fastest of this many medians
VALIDATION_CHUNK = 2**24  # elements validated at a time: float64 work of ~128 MiB beside training


class _RaceBench:
    """What a race times with, on one device and stream: fresh random dout, a dinp, and a
    buffer twice the L2 written before every timed call so each starts with a cold cache."""

    def __init__(self, shape: Shape, dtype: DType, device: int, stream: torch.cuda.Stream) -> None:
        torch_dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype.name]
        self.shape, self.dtype, self.device, self.stream = shape, dtype, device, stream
        dout_shape = (shape.B, shape.T, 3, shape.NH, shape.HD)
        dinp_shape = (shape.B, shape.T, shape.heads_in, shape.HD)
        self.dout = torch.randn(dout_shape, device=device, dtype=torch_dtype)
        self.dinp = torch.empty(dinp_shape, device=device, dtype=torch_dtype)
        l2 = torch.cuda.get_device_properties(device).L2_cache_size
        self.flush = torch.empty(2 * max(l2, 1 << 20), dtype=torch.uint8, device=device)

    def samples(self, launch: Callable[[], None]) -> list[float]:
        """RACE_REPS CUDA-event times (ms) of `launch` on the current stream, L2 flushed
        before each, after one untimed call."""
        samples = []
        for rep in range(RACE_REPS + 1):
            self.flush.fill_(rep)
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            launch()
            stop.record()
            stop.synchronize()
            if rep:
                samples.append(start.elapsed_time(stop))
        return samples

    def launch(self, launcher: _Launcher) -> None:
        launcher(self.dinp.data_ptr(), self.dout.data_ptr(), self.stream.cuda_stream)

    def time(self, launcher: _Launcher) -> list[float]:
        return self.samples(lambda: self.launch(launcher))

    def check(self, launcher: _Launcher) -> None:
        """One launch into a NaN-poisoned dinp, every element compared with the float64
        reference (`variants.reference.validate_output`, the tuner's validator); raises
        WrongResult when any differs."""
        import cupy as cp

        from tuner.race_record import WrongResult
        from variants.reference import validate_output

        self.dinp.fill_(float("nan"))
        self.launch(launcher)
        self.stream.synchronize()
        with cp.cuda.Device(self.device):
            validation = validate_output(
                _storage(self.dinp, cp),
                _storage(self.dout, cp),
                self.shape,
                self.dtype,
                cp,
                chunk_elements=VALIDATION_CHUNK,
            )
            cp.cuda.get_current_stream().synchronize()
            cp.get_default_memory_pool().free_all_blocks()
        if not validation.ok:
            raise WrongResult(validation.summary())

    def copy_ms(self) -> float:
        """A device-to-device copy of half the shape's bytes (as many read as written), timed
        as the candidates are: the fastest of COPY_ROUNDS medians (the tuner's rule)."""
        nbytes = self.shape.bytes_moved(self.dtype) // 2
        source = torch.ones(nbytes, dtype=torch.uint8, device=self.device)
        target = torch.empty_like(source)
        return min(statistics.median(self.samples(lambda: target.copy_(source))) for _ in range(COPY_ROUNDS))


def _storage(tensor: torch.Tensor, cp):
    """A CuPy view of a tensor's storage as the validator reads it (bf16 as uint16 bits)."""
    if tensor.dtype == torch.bfloat16:
        return cp.from_dlpack(tensor.view(torch.int16)).view(cp.uint16)
    return cp.from_dlpack(tensor)


def _race(launchers: list[_Launcher], shape: Shape, dtype: DType, device: int, gpu: str) -> _Launcher:
    """Time each candidate on fresh input (L2 flushed before every call; median of
    RACE_REPS) and keep the fastest for the process (`tuner.race`: the served configuration
    stays unless another beats it by more than RACE_MARGIN; a candidate that fails is
    skipped). Takes milliseconds once compiled. When recording, each candidate's output is
    validated before it is timed, a device copy of the same bytes is timed too, and the
    measurements are written as rows of this process's race run."""
    recorder = _recorder()
    with torch.cuda.device(device):
        stream = torch.cuda.Stream(device)
        with torch.cuda.stream(stream):
            bench = _RaceBench(shape, dtype, device, stream)
            winner = _race_on(bench, launchers, shape, dtype, device, gpu, recorder)
        stream.synchronize()
    return winner


def _race_on(
    bench: _RaceBench,
    launchers: list[_Launcher],
    shape: Shape,
    dtype: DType,
    device: int,
    gpu: str,
    recorder: RaceRecorder | None,
) -> _Launcher:
    """The race on a bench (`_RaceBench`: `time`, `check`, `copy_ms`), recorded by
    `recorder` unless it is None."""
    unchecked: set[int] = set()  # ids of candidates whose check itself failed

    def time_candidate(launcher: _Launcher) -> list[float]:
        if recorder is not None:
            _check_for_recording(bench, launcher, unchecked)
        return bench.time(launcher)

    result = run_race(launchers, time_candidate, describe=lambda lch: lch.config_key)
    copy_ms = _copy_ms_or_none(bench) if recorder is not None and result.timed else None
    timings = ", ".join(f"{t.candidate.config_key} {t.median_ms:.4f} ms" for t in result.timed)
    log.info("raced %s for %s %s: %s", len(launchers), shape, dtype.name, timings or "every one failed")
    winner = result.winner
    if result.timed:
        winner.served_from = "raced"
        winner.race = tuple((t.candidate.config_key, t.median_ms) for t in result.timed)
    if recorder is not None:
        checked = replace(result, timed=tuple(t for t in result.timed if id(t.candidate) not in unchecked))
        recorder.record(gpu, lambda run_id: _race_rows(checked, shape, dtype, device, gpu, copy_ms, run_id))
    return winner


def _check_for_recording(bench: _RaceBench, launcher: _Launcher, unchecked: set[int]) -> None:
    """Validate a candidate before its time is recorded: a wrong result raises (the race skips
    it, and its row says so); a check that cannot run (e.g. out of memory) leaves the
    candidate in the race but out of the rows, which claim a validated output."""
    from tuner.race_record import WrongResult

    try:
        bench.check(launcher)
    except WrongResult:
        raise
    except Exception as exc:
        unchecked.add(id(launcher))
        log.warning(
            "could not validate %s for the race's rows: %s: %s", launcher.config_key, type(exc).__name__, exc
        )


def _copy_ms_or_none(bench: _RaceBench) -> float | None:
    try:
        return bench.copy_ms()
    except Exception as exc:
        log.warning("could not time the device copy for the race's rows: %s: %s", type(exc).__name__, exc)
        return None


def _race_rows(
    result: RaceResult[_Launcher],
    shape: Shape,
    dtype: DType,
    device: int,
    gpu: str,
    copy_ms: float | None,
    run_id: str,
) -> list[dict]:
    from tuner.race_record import race_rows

    return race_rows(
        result,
        lambda launcher: launcher.config,
        identity=_identity(device),
        gpu=gpu,
        shape=shape,
        dtype=dtype,
        copy_ms=copy_ms,
        run_id=run_id,
    )


_IDENTITIES: dict[int, GpuIdentity] = {}


def _identity(device: int) -> GpuIdentity:
    """The device as a trial row names it (`tuner.gpu.session.read_identity`), read once."""
    identity = _IDENTITIES.get(device)
    if identity is None:
        import cupy as cp

        from tuner.gpu.session import read_identity

        identity = _IDENTITIES.setdefault(device, read_identity(cp.cuda.Device(device)))
    return identity


# Recording: a race's measurements become trial rows of this process's own run
# (`tuner.race_record`), where the user allows it: REPKV_RECORD=1 (read when a race runs)
# records under the user's results directory, `record_races()` anywhere. Off by default.
_RECORD: Path | bool | None = None  # None: REPKV_RECORD decides; False: off; True: user dir
_RECORDERS: dict[Path, RaceRecorder] = {}


def record_races(enabled: bool = True, directory: Path | str | None = None) -> None:
    """Record the measurements of every later race of this process as trial rows under
    `directory` (default: `results.store.user_results_dir()`, i.e. $REPKV_RESULTS_DIR or the
    user data directory), or stop recording (`enabled=False`). Overrides REPKV_RECORD."""
    global _RECORD
    _RECORD = False if not enabled else (Path(directory) if directory is not None else True)


def _recording_directory() -> Path | None:
    setting = _RECORD
    if setting is None:
        setting = os.environ.get("REPKV_RECORD", "0") not in ("", "0")
    if setting is False:
        return None
    if setting is True:
        from results.store import user_results_dir

        return user_results_dir()
    return setting


def _recorder() -> RaceRecorder | None:
    """The recorder for the directory races are recorded under now, or None (recording off,
    or it could not be set up: logged, never raised)."""
    try:
        directory = _recording_directory()
        if directory is None:
            return None
        recorder = _RECORDERS.get(directory)
        if recorder is None:
            from tuner.race_record import RaceRecorder

            recorder = _RECORDERS.setdefault(directory, RaceRecorder(directory))
        return recorder
    except Exception as exc:
        log.warning("not recording the race: %s: %s", type(exc).__name__, exc)
        return None


LAUNCHERS = _Launchers()


# (dout shape, dtype, device index, NH_KV) -> (launcher or None for B*T = 0, dinp shape): what
# a call needs once its arguments were checked, found with one dictionary lookup.
_PLANS: dict[tuple, tuple[_Launcher | None, tuple[int, int, int, int]]] = {}


def _plan(dout: torch.Tensor, NH_KV: int, device: int) -> tuple[_Launcher | None, tuple[int, int, int, int]]:
    key = (dout.shape, dout.dtype, device, NH_KV)
    found = _PLANS.get(key)
    if found is None:
        B, T, NH, NH_KV, HD = _check(tuple(dout.shape), NH_KV)
        launcher = None
        if B * T:
            launcher = LAUNCHERS.get(((B, T, NH, NH_KV, HD), _DTYPE_NAMES[dout.dtype], device))
        found = _PLANS.setdefault(key, (launcher, (B, T, NH + 2 * NH_KV, HD)))
    return found


def _launch(launcher: _Launcher | None, dinp: torch.Tensor, dout: torch.Tensor, device: int) -> None:
    if launcher is None:
        return
    stream = torch._C._cuda_getCurrentRawStream(device)
    if device == torch._C._cuda_getDevice():
        launcher(dinp.data_ptr(), dout.data_ptr(), stream)
    else:
        with torch.cuda.device(device):
            launcher(dinp.data_ptr(), dout.data_ptr(), stream)


def _tuned(dout: torch.Tensor) -> bool:
    return dout.is_cuda and dout.dtype in _DTYPE_NAMES


def _backward_into(dinp: torch.Tensor, dout: torch.Tensor, NH_KV: int) -> None:
    if _tuned(dout):
        dout = _aligned(dout)
        device = dout.get_device()
        _launch(_plan(dout, NH_KV, device)[0], dinp, dout, device)
    else:
        dinp.copy_(reference_backward(dout, NH_KV))


def _check_out(out: torch.Tensor, dout: torch.Tensor, expected: tuple[int, ...]) -> None:
    if tuple(out.shape) != tuple(expected) or out.dtype != dout.dtype or out.device != dout.device:
        raise ValueError(
            f"out must be a {dout.dtype} tensor of shape {tuple(expected)} on {dout.device}; "
            f"got {out.dtype} {tuple(out.shape)} on {out.device}"
        )
    if not out.is_contiguous():
        raise ValueError("out must be contiguous")
    if out.is_cuda and out.data_ptr() % ALIGNMENT:
        raise ValueError(
            f"out must start on a {ALIGNMENT}-byte boundary (the tuned kernels move 16-byte words); "
            f"it starts {out.data_ptr() % ALIGNMENT} bytes past one (a view at an offset?)"
        )


def _aligned(dout: torch.Tensor) -> torch.Tensor:
    """dout, contiguous and starting on a 16-byte boundary (a copy where it is not: a view at an
    odd offset would make a 16-byte load fault)."""
    if not dout.is_contiguous():
        dout = dout.contiguous()
    return dout.clone() if dout.data_ptr() % ALIGNMENT else dout


def _eager_ok(dout: torch.Tensor) -> bool:
    """A plain CUDA tensor with no tracing or dispatch mode around it: the op's body can run
    without PyTorch's dispatcher (the same launch, a fraction of the CPU cost)."""
    return (
        type(dout) is torch.Tensor
        and dout.is_cuda
        and dout.dtype in _DTYPE_NAMES
        and not torch._C._len_torch_dispatch_stack()
        and not torch._C._is_torch_function_mode_enabled()
    )


def _eager_backward(dout: torch.Tensor, NH_KV: int, out: torch.Tensor | None) -> torch.Tensor:
    dout = _aligned(dout)
    device = dout.get_device()
    launcher, shape = _plan(dout, NH_KV, device)
    if out is None:
        out = dout.new_empty(shape)
    else:
        _check_out(out, dout, shape)
    _launch(launcher, out, dout, device)
    return out


# --- the operators ----------------------------------------------------------------------------
def _dinp_shape(dout: torch.Tensor, NH_KV: int) -> tuple[int, int, int, int]:
    B, T, NH, NH_KV, HD = _check(tuple(dout.shape), NH_KV)
    return B, T, NH + 2 * NH_KV, HD


@torch.library.custom_op("repkv_tune::repkv_backward", mutates_args=())
def _repkv_backward(dout: torch.Tensor, NH_KV: int) -> torch.Tensor:
    dinp = dout.new_empty(_dinp_shape(dout, NH_KV))
    _backward_into(dinp, dout, NH_KV)
    return dinp


@_repkv_backward.register_fake
def _(dout: torch.Tensor, NH_KV: int) -> torch.Tensor:
    return dout.new_empty(_dinp_shape(dout, NH_KV))


@torch.library.custom_op("repkv_tune::repkv_backward_out", mutates_args=("out",))
def _repkv_backward_out(dout: torch.Tensor, NH_KV: int, out: torch.Tensor) -> None:
    _check_out(out, dout, _dinp_shape(dout, NH_KV))
    _backward_into(out, dout, NH_KV)


@_repkv_backward_out.register_fake
def _(dout: torch.Tensor, NH_KV: int, out: torch.Tensor) -> None:
    return None


def repkv_backward(dout: torch.Tensor, NH_KV: int, out: torch.Tensor | None = None) -> torch.Tensor:
    """dinp (B, T, NH + 2*NH_KV, HD) from dout (B, T, 3, NH, HD): the tuned repkv backward.
    With `out`, writes into it (contiguous, same dtype and device) and returns it.

    On a plain CUDA tensor outside tracing it launches directly; under torch.compile, a
    dispatch mode or on the CPU it goes through the registered operator."""
    if _eager_ok(dout):
        return _eager_backward(dout, NH_KV, out)
    if out is None:
        return torch.ops.repkv_tune.repkv_backward(dout, NH_KV)
    torch.ops.repkv_tune.repkv_backward_out(dout, NH_KV, out)
    return out


_GATHER_INDEX: dict[tuple[int, int, torch.device], torch.Tensor] = {}


def _gather_index(NH: int, NH_KV: int, device: torch.device) -> torch.Tensor:
    """Heads of qkv that make (q heads, k replicated, v replicated): one index_select."""
    key = (NH, NH_KV, device)
    index = _GATHER_INDEX.get(key)
    if index is None:
        h = torch.arange(NH, device=device)
        nrep = NH // NH_KV
        index = _GATHER_INDEX.setdefault(key, torch.cat([h, NH + h // nrep, NH + NH_KV + h // nrep]))
    return index


@torch.library.custom_op("repkv_tune::repkv", mutates_args=())
def _repkv(qkv: torch.Tensor, NH: int, NH_KV: int) -> torch.Tensor:
    _check_qkv(tuple(qkv.shape), NH, NH_KV)
    B, T, _, HD = qkv.shape
    return qkv.index_select(2, _gather_index(NH, NH_KV, qkv.device)).view(B, T, 3, NH, HD)


@_repkv.register_fake
def _(qkv: torch.Tensor, NH: int, NH_KV: int) -> torch.Tensor:
    _check_qkv(tuple(qkv.shape), NH, NH_KV)
    B, T, _, HD = qkv.shape
    return qkv.new_empty((B, T, 3, NH, HD))


def _setup(ctx, inputs, output) -> None:
    ctx.NH_KV = inputs[2]


def _repkv_grad(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
    return repkv_backward(grad, ctx.NH_KV), None, None


torch.library.register_autograd("repkv_tune::repkv", _repkv_grad, setup_context=_setup)


def repkv(qkv: torch.Tensor, NH: int, NH_KV: int) -> torch.Tensor:
    """llm.c's repkv forward: (B, T, NH + 2*NH_KV, HD) -> (B, T, 3, NH, HD) with each K and V
    head replicated NH / NH_KV times; its backward is the tuned repkv backward."""
    return torch.ops.repkv_tune.repkv(qkv, NH, NH_KV)


def served(
    shape: tuple[int, int, int, int, int], dtype: torch.dtype, device: int = 0
) -> tuple[str, str, tuple[tuple[str, float], ...]]:
    """(configuration key, how it was chosen: "exact" | "nearest" | "raced" | "generic", the
    race's (configuration, median ms) if one was run) of the backward for (B, T, NH, NH_KV,
    HD) on this CUDA device, compiling (and racing) it if needed."""
    launcher = LAUNCHERS.get((tuple(shape), _DTYPE_NAMES[dtype], device))
    return launcher.config_key, launcher.served_from, launcher.race


__all__ = ["record_races", "reference_backward", "repkv", "repkv_backward", "served"]
