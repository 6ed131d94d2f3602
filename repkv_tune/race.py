"""The race a PyTorch op runs on the first call for a shape nobody tuned: the shortlist's kernels
timed on the device (fresh random dout, L2 flushed before every call and the GPU held
RACE_HOLD_US after it, as the tuner times; median of RACE_REPS x RACE_ROUNDS, interleaved), the
decision left to `tuner.runners.race`, and, where the user allows it, the measurements recorded as trial
rows of this process's own run (`tuner.runners.race_record`). `repkv_tune.launcher` calls `race` once
per (shape, dtype, device) and keeps the winner. The race times the default op (repkv backward:
dout in, dinp out); the other ops serve their selected configuration without a race."""

from __future__ import annotations

import logging
import os
import statistics
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from results.schema import COPY_FASTEST, DEFAULT_HOLD_US, L2_FED
from tuner.runners.race import run_race
from variants.compile_cache import OFF

if TYPE_CHECKING:
    from repkv_tune.launcher import Launcher
    from tuner.runners.race import RaceResult
    from tuner.runners.race_record import RaceRecorder
    from tuner.runners.runner import GpuIdentity
    from variants import DType, Shape

log = logging.getLogger("repkv_tune.ops")


def switched_on(name: str, default: str) -> bool:
    """Whether the environment variable `name` (unset: `default`) is on: an on/off variable
    (REPKV_RACE, REPKV_RECORD) is off for the values that turn $REPKV_NVRTC_CACHE off."""
    return os.environ.get(name, default).strip().lower() not in OFF


RACE = switched_on("REPKV_RACE", "1")
# The L2 state the op's configurations are chosen (and its races timed) in: fed by default, as
# in a training step, where the kernel before (attention's backward) has just written dout;
# REPKV_L2=cold for a call that starts from a cold L2 (results.schema.L2_STATES).
L2 = os.environ.get("REPKV_L2", L2_FED)
RACE_REPS = 7  # timed calls of a candidate per round, after one untimed call
# Rounds of the race, every candidate once a round, interleaved (tuner.runners.race.run_race): 35
# samples a candidate, enough to tell apart two configurations 2% apart, in milliseconds.
RACE_ROUNDS = 5
# The GPU-side wait after each flush (tuner.runners.gpu.timing.HOLD_SOURCE): the timed launch is queued
# before the GPU reaches it, so a race times what the tuner times and its recorded rows rank
# with the tuner's (RACE_REPS + 1 holds: about 1.2 ms per candidate).
RACE_HOLD_US = DEFAULT_HOLD_US
COPY_ROUNDS = 3  # the device copy a recorded race is held to: the fastest of this many medians
VALIDATION_CHUNK = 2**24  # elements validated at a time: float64 work of ~128 MiB beside training


class _RaceBench:
    """What a race times with, on one device and stream: fresh random dout, a dinp, a buffer
    twice the L2 written before every timed call so each starts with a cold cache, and the
    hold kernel launched after it."""

    def __init__(self, shape: Shape, dtype: DType, device: int, stream: torch.cuda.Stream) -> None:
        torch_dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype.name]
        self.shape, self.dtype, self.device, self.stream = shape, dtype, device, stream
        dout_shape = (shape.B, shape.T, 3, shape.NH, shape.HD)
        dinp_shape = (shape.B, shape.T, shape.heads_in, shape.HD)
        self.dout = torch.randn(dout_shape, device=device, dtype=torch_dtype)
        self.dinp = torch.empty(dinp_shape, device=device, dtype=torch_dtype)
        l2 = torch.cuda.get_device_properties(device).L2_cache_size
        self.flush = torch.empty(2 * max(l2, 1 << 20), dtype=torch.uint8, device=device)
        import cupy as cp
        import numpy as np

        from tuner.runners.gpu.timing import hold_kernel

        self._hold = hold_kernel(device)
        self._hold_ns = np.uint64(int(RACE_HOLD_US * 1000))
        self._cupy_stream = cp.cuda.ExternalStream(stream.cuda_stream, device)

    def hold(self) -> None:
        """RACE_HOLD_US of waiting on the GPU, on the race's stream."""
        import cupy as cp

        with cp.cuda.Device(self.device):
            self._hold((1,), (1,), (self._hold_ns,), stream=self._cupy_stream)

    def samples(self, launch: Callable[[], None]) -> list[float]:
        """RACE_REPS CUDA-event times (ms) of `launch` on the current stream, L2 flushed and
        the GPU held before each, after one untimed call."""
        samples = []
        for rep in range(RACE_REPS + 1):
            self.flush.fill_(rep)
            self.hold()
            if L2 == L2_FED:  # dout written after the flush, as the kernel before leaves it
                self.dout.fill_(1.0)
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            launch()
            stop.record()
            stop.synchronize()
            if rep:
                samples.append(start.elapsed_time(stop))
        return samples

    def launch(self, launcher: Launcher) -> None:
        launcher(self.dinp.data_ptr(), self.dout.data_ptr(), stream=self.stream.cuda_stream)

    def time(self, launcher: Launcher) -> list[float]:
        return self.samples(lambda: self.launch(launcher))

    def check(self, launcher: Launcher) -> None:
        """One launch into a NaN-poisoned dinp, every element compared with the float64
        reference (`variants.reference.validate_output`, the tuner's validator); raises
        WrongResult when any differs."""
        import cupy as cp

        from tuner.runners.race_record import WrongResult
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
        as the candidates are: the fastest of COPY_ROUNDS medians of each of PyTorch's copy
        (cudaMemcpyAsync) and the tuner's 16-byte copy kernel (the tuner's rule)."""
        import cupy as cp

        from tuner.runners.gpu.timing import copy_kernel

        nbytes = self.shape.bytes_moved(self.dtype) // 2
        source = torch.ones(nbytes, dtype=torch.uint8, device=self.device)
        target = torch.empty_like(source)
        with cp.cuda.Device(self.device):
            launch = copy_kernel(target.data_ptr(), source.data_ptr(), nbytes, self._cupy_stream)

        def by_kernel() -> None:
            with cp.cuda.Device(self.device):
                launch()

        copies = (lambda: target.copy_(source), by_kernel)
        return min(statistics.median(self.samples(copy)) for copy in copies for _ in range(COPY_ROUNDS))


def _storage(tensor: torch.Tensor, cp):
    """A CuPy view of a tensor's storage as the validator reads it (bf16 as uint16 bits)."""
    if tensor.dtype == torch.bfloat16:
        return cp.from_dlpack(tensor.view(torch.int16)).view(cp.uint16)
    return cp.from_dlpack(tensor)


def race(
    launchers: list[Launcher],
    shape: Shape,
    dtype: DType,
    device: int,
    gpu: str,
    refine: Callable[[Launcher], list[Launcher]] | None = None,
) -> Launcher:
    """Time each candidate on fresh input (L2 flushed before every call; median of RACE_REPS
    calls in each of RACE_ROUNDS interleaved rounds) and keep the fastest for the process
    (`tuner.runners.race`: the served configuration stays unless another beats it by more than
    RACE_MARGIN; a candidate that fails is skipped). Takes tens of milliseconds once compiled.
    With `refine` (where the head layout was never tuned), the winner then races what
    `refine(winner)` compiles, its one-parameter neighbours: a local search's first step, which
    keeps the winner unless a neighbour beats it by RACE_MARGIN too.
    When recording, each candidate's output is validated before it is timed, a device copy
    of the same bytes is timed too, and the measurements are written as rows of this
    process's race run."""
    recorder = _recorder()
    with torch.cuda.device(device):
        stream = torch.cuda.Stream(device)
        with torch.cuda.stream(stream):
            bench = _RaceBench(shape, dtype, device, stream)
            winner = _race_on(bench, launchers, shape, dtype, device, gpu, recorder)
            winner = _refine_on(bench, winner, refine, shape, dtype, device, gpu, recorder)
        stream.synchronize()
    return winner


def _refine_on(
    bench: _RaceBench,
    winner: Launcher,
    refine: Callable[[Launcher], list[Launcher]] | None,
    shape: Shape,
    dtype: DType,
    device: int,
    gpu: str,
    recorder: RaceRecorder | None,
) -> Launcher:
    """The race's winner against its neighbours (`refine(winner)`), the winner first; the
    neighbours that cannot be compiled are left out by `refine`. The first race's timings stay
    on the winner, before the second's."""
    if refine is None or not winner.race:
        return winner
    steps = [step for step in refine(winner) if step.config_key != winner.config_key]
    if not steps:
        return winner
    first = winner.race
    refined = _race_on(bench, [winner, *steps], shape, dtype, device, gpu, recorder)
    if refined.race:
        refined.race = first + tuple(t for t in refined.race if t[0] != winner.config_key)
        refined.served_from = "refined" if refined is not winner else "raced"
    return refined


def _race_on(
    bench: _RaceBench,
    launchers: list[Launcher],
    shape: Shape,
    dtype: DType,
    device: int,
    gpu: str,
    recorder: RaceRecorder | None,
) -> Launcher:
    """The race on a bench (`_RaceBench`: `time`, `check`, `copy_ms`), recorded by
    `recorder` unless it is None."""
    unchecked: set[int] = set()  # ids of candidates whose check itself failed
    checked: set[int] = set()  # ids of candidates validated (once, before their first round)

    def time_candidate(launcher: Launcher) -> list[float]:
        if recorder is not None and id(launcher) not in checked:
            _check_for_recording(bench, launcher, unchecked)
            checked.add(id(launcher))
        return bench.time(launcher)

    result = run_race(launchers, time_candidate, describe=lambda lch: lch.config_key, rounds=RACE_ROUNDS)
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


def _check_for_recording(bench: _RaceBench, launcher: Launcher, unchecked: set[int]) -> None:
    """Validate a candidate before its time is recorded: a wrong result raises (the race skips
    it, and its row says so); a check that cannot run (e.g. out of memory) leaves the
    candidate in the race but out of the rows, which claim a validated output."""
    from tuner.runners.race_record import WrongResult

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
    result: RaceResult[Launcher],
    shape: Shape,
    dtype: DType,
    device: int,
    gpu: str,
    copy_ms: float | None,
    run_id: str,
) -> list[dict]:
    from tuner.runners.race_record import race_rows

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
    """The device as a trial row names it (`tuner.runners.gpu.session.read_identity`), read once; a
    race times with RACE_HOLD_US after its flush, and holds to the tuner's copy."""
    identity = _IDENTITIES.get(device)
    if identity is None:
        import cupy as cp

        from tuner.runners.gpu.session import read_identity

        timed_alike = replace(
            read_identity(cp.cuda.Device(device)), hold_us=RACE_HOLD_US, l2=L2, copy_method=COPY_FASTEST
        )
        identity = _IDENTITIES.setdefault(device, timed_alike)
    return identity


# Recording: a race's measurements become trial rows of this process's own run
# (`tuner.runners.race_record`), where the user allows it: REPKV_RECORD=1 (read when a race runs)
# records under the user's results directory, `record_races()` anywhere. Off by default.
_RECORD: Path | bool | None = None  # None: REPKV_RECORD decides; False: off; True: user dir
_RECORDERS: dict[Path, RaceRecorder] = {}


def record_races(enabled: bool = True, directory: Path | str | None = None) -> None:
    """Record the measurements of every later race of this process as trial rows under
    `directory` (default: `results.store.user_results_dir()`, i.e. $REPKV_RESULTS_DIR or the
    user data directory), or stop recording (`enabled=False`). Overrides REPKV_RECORD."""
    global _RECORD
    if not isinstance(enabled, bool):  # record_races("races/") would record in the user directory
        raise TypeError(
            f"record_races: enabled must be True or False, got {enabled!r}; a directory goes as directory=..."
        )
    _RECORD = False if not enabled else (Path(directory) if directory is not None else True)


def _recording_directory() -> Path | None:
    setting = _RECORD
    if setting is None:
        setting = switched_on("REPKV_RECORD", "0")
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
            from tuner.runners.race_record import RaceRecorder

            recorder = _RECORDERS.setdefault(directory, RaceRecorder(directory))
        return recorder
    except Exception as exc:
        log.warning("not recording the race: %s: %s", type(exc).__name__, exc)
        return None
