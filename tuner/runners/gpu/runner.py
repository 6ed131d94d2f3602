"""GpuRunner: the study's Runner on a real GPU, measuring in a worker process that is
killed and restarted after a hang (timeout) or a crash (a poisoned CUDA context).

One GPU, one measuring process: the runner holds an exclusive lock named after the host and
the GPU's PCI bus id for as long as it lives (`GpuBusy` if another process holds it), so two
tuners on one host never time kernels on the same GPU at once. While it waits for the worker
it looks at its stop flag: a stop request kills the worker and ends the trial without a row
(TrialInterrupted) instead of waiting for a compile or a hung kernel."""

from __future__ import annotations

import contextlib
import fcntl
import multiprocessing as mp
import os
import re
import signal
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import ClassVar

from results.schema import DEFAULT_HOLD_US, L2_COLD, Status
from tuner.interrupt import TrialInterrupted
from tuner.runners.runner import GpuIdentity, Measurement, Runner, Work
from variants import Config, DType, Family, Shape
from variants.errors import RepkvTuneError

POLL_S = 0.1


class WorkerFailed(RepkvTuneError, RuntimeError):
    """The worker could not start or answered with an internal error."""


class GpuBusy(RepkvTuneError, RuntimeError):
    """Another process measures on this GPU."""


def gpu_lock_path(identity: GpuIdentity, device: int) -> Path:
    """Where the lock of one GPU of this host lives (the temporary directory: per host)."""
    which = identity.pci_bus_id or f"dev{device}-{os.environ.get('CUDA_VISIBLE_DEVICES', 'all')}"
    name = re.sub(r"[^A-Za-z0-9._-]", "-", f"{identity.host}-{which}")
    return Path(tempfile.gettempdir()) / f"repkv-tune-gpu-{name}.lock"


class GpuLock:
    """An exclusive flock on a file, released by the kernel when the process dies. Shared by
    the runners of one process (each counted): only other processes are kept out."""

    _held: ClassVar[dict[str, list[int]]] = {}  # path -> [fd, runners holding it]

    def __init__(self, path: Path) -> None:
        self.path = path
        self._holding = False

    def acquire(self) -> None:
        held = self._held.get(str(self.path))
        if held is not None:
            held[1] += 1
            self._holding = True
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise GpuBusy(
                f"this GPU is being measured by {holder} ({self.path}): one measuring process per GPU; "
                "two timing kernels on one GPU corrupt each other's numbers"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}\n".encode(), 0)
        self._held[str(self.path)] = [fd, 1]
        self._holding = True

    def release(self) -> None:
        if not self._holding:
            return
        self._holding = False
        held = self._held[str(self.path)]
        held[1] -= 1
        if held[1] == 0:
            del self._held[str(self.path)]
            os.close(held[0])


class GpuRunner(Runner):
    def __init__(
        self,
        device: int = 0,
        timeout_s: float = 10.0,
        families: Mapping[str, Family] | None = None,
        compile_timeout_s: float = 300.0,
        start_timeout_s: float = 180.0,
        reps: int = 50,
        hold_us: float = DEFAULT_HOLD_US,
        l2: str = L2_COLD,
    ):
        super().__init__()
        self.device = device
        self.timeout_s = timeout_s
        self.compile_timeout_s = compile_timeout_s
        self.start_timeout_s = start_timeout_s
        self.families = dict(families) if families is not None else None
        self.reps = reps
        self.hold_us = hold_us
        self.l2 = l2
        self.restarts = 0
        self._copy_ms: dict[tuple[Shape, str], float] = {}
        self._context = mp.get_context("spawn")
        self._process: mp.process.BaseProcess | None = None
        self._conn = None
        self.identity: GpuIdentity = self._start()
        self.lock = GpuLock(gpu_lock_path(self.identity, device))
        try:
            self.lock.acquire()
        except GpuBusy:
            self.close()
            raise

    # --- worker life --------------------------------------------------------------------
    def _start(self) -> GpuIdentity:
        from tuner.runners.gpu.worker import serve

        parent, child = self._context.Pipe()
        process = self._context.Process(
            target=serve,
            args=(child, self.device, self.families, self.reps, self.hold_us, self.l2),
            daemon=True,
        )
        process.start()
        child.close()
        self._process, self._conn = process, parent
        kind, payload = self._receive(self.start_timeout_s, "start", interruptible=False)
        if kind != "ready":
            self._kill()
            raise WorkerFailed(f"GPU worker failed to start:\n{payload}")
        return payload

    def _kill(self) -> None:
        if self._process is not None and self._process.is_alive():
            self._process.kill()
        if self._process is not None:
            self._process.join(timeout=10)
        if self._conn is not None:
            self._conn.close()
        self._process = self._conn = None

    def _restart(self) -> None:
        self._kill()
        self.restarts += 1
        self.identity = self._start()

    def _receive(self, timeout: float, what: str, interruptible: bool = True) -> tuple:
        assert self._conn is not None
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{what}: no answer within {timeout:g} s")
            if self._conn.poll(min(POLL_S, left)):
                break
            if interruptible and self.stop:
                self._kill()  # a compile or a kernel may take long: the run is ending
                raise TrialInterrupted(what)
        try:
            message = self._conn.recv()
        except (EOFError, OSError) as exc:
            raise ConnectionError(f"{what}: the worker died (exit code {self._exitcode()})") from exc
        return message[0], (message[1] if len(message) > 1 else None)

    def _exitcode(self) -> int | None:
        if self._process is None:
            return None
        self._process.join(timeout=5)
        return self._process.exitcode

    def _request(self, request: tuple, timeout: float, what: str):
        if self._conn is None:
            raise TrialInterrupted("stopped")
        self._conn.send(request)
        kind, payload = self._receive(timeout, what)
        if kind == "error":
            raise WorkerFailed(payload)
        return payload

    # --- the Runner contract ----------------------------------------------------------------
    def measure(self, shape: Shape, dtype: DType, config: Config) -> Measurement:
        if self.stop or self._conn is None:
            raise TrialInterrupted("stopped")
        self._conn.send(("measure", shape, dtype, config))
        try:
            kind, payload = self._receive(self.compile_timeout_s, "compile")
            if kind == "compiled":
                kind, payload = self._receive(self.timeout_s, "run")
        except TimeoutError as exc:
            self._restart()
            return Measurement.failed(Status.TIMEOUT, f"{exc}; worker killed and restarted")
        except ConnectionError as exc:
            self._restart()
            return Measurement.failed(Status.CRASH, f"{exc}; worker restarted")
        if kind == "error":
            raise WorkerFailed(payload)
        if payload.status == Status.CRASH:  # the worker reported a poisoned context and exits
            self._restart()
        return payload

    def copy_time(self, shape: Shape, dtype: DType) -> float:
        key = (shape, dtype.name)
        if key not in self._copy_ms:
            self._copy_ms[key] = self._request(("copy", shape, dtype), self.compile_timeout_s, "copy")
        return self._copy_ms[key]

    def prepare(self, work: Iterable[Work]) -> int:
        """Compile the kernels of many trials at once, in parallel threads of the worker."""
        return self._request(("prepare", list(work)), self.compile_timeout_s * 4, "prepare")

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(OSError):
                self._conn.send(("stop",))
            if self._process is not None:
                self._process.join(timeout=10)
        self._kill()
        lock = getattr(self, "lock", None)
        if lock is not None:
            lock.release()

    def abort(self) -> None:
        process = self._process
        if process is not None and process.pid is not None:
            with contextlib.suppress(OSError):
                os.kill(process.pid, signal.SIGKILL)
