"""GpuRunner: the study's Runner on a real GPU, measuring in a worker process that is
killed and restarted after a hang (timeout) or a crash (a poisoned CUDA context)."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
from collections.abc import Iterable, Mapping

from results.schema import Status
from tuner.runner import GpuIdentity, Measurement, Runner, Work
from variants import Config, DType, Family, Shape


class WorkerFailed(RuntimeError):
    """The worker could not start or answered with an internal error."""


class GpuRunner(Runner):
    def __init__(
        self,
        device: int = 0,
        timeout_s: float = 10.0,
        families: Mapping[str, Family] | None = None,
        compile_timeout_s: float = 300.0,
        start_timeout_s: float = 180.0,
        reps: int = 50,
    ):
        super().__init__()
        self.device = device
        self.timeout_s = timeout_s
        self.compile_timeout_s = compile_timeout_s
        self.start_timeout_s = start_timeout_s
        self.families = dict(families) if families is not None else None
        self.reps = reps
        self.restarts = 0
        self._copy_ms: dict[tuple[Shape, str], float] = {}
        self._context = mp.get_context("spawn")
        self._process: mp.process.BaseProcess | None = None
        self._conn = None
        self.identity: GpuIdentity = self._start()

    # --- worker life --------------------------------------------------------------------
    def _start(self) -> GpuIdentity:
        from tuner.gpu.worker import serve

        parent, child = self._context.Pipe()
        process = self._context.Process(
            target=serve, args=(child, self.device, self.families, self.reps), daemon=True
        )
        process.start()
        child.close()
        self._process, self._conn = process, parent
        kind, payload = self._receive(self.start_timeout_s, "start")
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

    def _receive(self, timeout: float, what: str) -> tuple:
        assert self._conn is not None
        if not self._conn.poll(timeout):
            raise TimeoutError(f"{what}: no answer within {timeout:g} s")
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
        assert self._conn is not None
        self._conn.send(request)
        kind, payload = self._receive(timeout, what)
        if kind == "error":
            raise WorkerFailed(payload)
        return payload

    # --- the Runner contract ----------------------------------------------------------------
    def measure(self, shape: Shape, dtype: DType, config: Config) -> Measurement:
        assert self._conn is not None
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
