"""How the peers benchmark measures each peer (methods of `PeerBench`, bench_kernels_parts.loop,
whose rows, session and budget they use): the references (the device copy, an empty launch),
this project's kernels (llm.c's kernel1, the tuned configuration), the PyTorch formulations
(eager and torch.compile) and the Triton kernel. Each is validated before it is timed, and
leaves a rebuilder for the later passes where it measured ok."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tuner.peers.names import (
    CEILING,
    COPY_PEER,
    EMPTY_PEER,
    LAUNCH,
    STATUS_OK,
    TRITON,
    TRITON_PEER,
    TUNED,
    TUNED_PEER,
)
from tuner.peers.rows import make_row
from variants import Config, DType, Shape

from .device import recoverable

# the copy row's name of each method of tuner.runners.gpu.timing.COPY_METHODS
COPY_NAMES = {"memcpy": "cudaMemcpyAsync D2D", "kernel": "16-byte copy kernel"}


class PeerMeasures:
    """The peers' measurements, mixed into PeerBench."""

    # --- the references ---
    def copy(self, shape: Shape, dtype: DType) -> None:
        """The device copy of half the bytes (read and written: the kernel's bytes moved):
        the fastest of three medians, each over fresh buffers, of the faster of
        cudaMemcpyAsync and the 16-byte copy kernel (as the tuner holds kernels to)."""
        self.session.release()
        nbytes = shape.bytes_moved(dtype) // 2
        flush = self.session.flush
        rounds = [self.device.time_copy(nbytes, flush, reps=self.plan.reps) for _ in range(3)]
        method, best = min(rounds, key=lambda r: r[1].median_ms)
        self.copy_methods[(shape.key, dtype.name)] = method
        medians = ", ".join(f"{t.median_ms:.4f} ({m})" for m, t in rounds)
        config = f"{COPY_NAMES[method]} of {nbytes} B; medians {medians}"
        self.timing_row(shape, dtype, COPY_PEER, CEILING, best, config=config)

    def empty(self, shape: Shape, dtype: DType) -> None:
        timing = self.timed(self.device.empty_launch)
        self.timing_row(shape, dtype, EMPTY_PEER, LAUNCH, timing, config="empty_kernel<<<1, 1>>>")

    # --- this project's kernels: the session validates, then times ---
    def kernel(
        self, shape: Shape, dtype: DType, peer: str, kind: str, config: Config, note: str = "", **extra: Any
    ) -> None:
        m = self.session.measure(shape, dtype, config)
        if m.status == STATUS_OK:
            self.rebuilders[(shape.key, dtype.name, peer)] = lambda: self.kernel_launch(shape, dtype, config)
        self.add(
            make_row(
                shape,
                dtype,
                peer,
                kind,
                status=m.status,
                message=m.message if m.message else note,
                time_ms=m.time_ms,
                p20_ms=m.p20_ms,
                p80_ms=m.p80_ms,
                reps=m.reps,
                config=config.key,
                **extra,
            )
        )

    def kernel_launch(self, shape: Shape, dtype: DType, config: Config) -> Callable[[], Any]:
        launch = self.session.launcher(shape, dtype, config)
        self.require(self.session.run_checked(shape, dtype, launch))
        return launch

    @staticmethod
    def failure(check: Any) -> str | None:
        """What is wrong with a check's outcome (a Validation, or a message saying the result
        was not a dinp), or None if it is an ok Validation."""
        if isinstance(check, str):
            return check
        return None if check.ok else check.summary()

    def require(self, check: Any) -> None:
        """Raise with the check's words unless it is an ok Validation."""
        message = self.failure(check)
        if message is not None:
            raise ValueError(message)

    def tuned(self, shape: Shape, dtype: DType) -> None:
        choice = self.choices.get((shape, dtype.name))
        if choice is None:
            message = f"nothing in the store for GPU {self.device.label!r} serves this shape and dtype"
            self.add(make_row(shape, dtype, TUNED_PEER, TUNED, status="missing", message=message))
            return
        tuned_from = f"{choice.group.shape.key} {choice.group.dtype.name}"
        note = f"{choice.match}, tuned at {tuned_from}"
        config = choice.candidate.config
        self.kernel(shape, dtype, TUNED_PEER, TUNED, config, note, match=choice.match, tuned_from=tuned_from)

    # --- PyTorch peers ---
    def check_tensor(self, shape: Shape, dtype: DType, call: Callable[[], Any]) -> Any:
        """Fresh random dout; the allocator's free memory of dinp's size poisoned with NaN (the
        call allocates its output there); one call; every element of its result compared with
        the reference. Returns the Validation, or a message when the result is not a dinp."""
        from tuner.runners.gpu.torch_peers import TORCH_DTYPES
        from variants.reference import random_input, validate_output

        torch, xp = self.torch, self.device.xp
        tdtype = TORCH_DTYPES[dtype.name]
        dout, _ = self.session.buffers(shape, dtype)
        dout[...] = random_input(shape, dtype, xp)
        if self.device.torch_device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        poison = torch.full((shape.dinp_numel,), float("nan"), dtype=tdtype, device=self.device.torch_device)
        del poison
        out = call()
        if self.device.torch_device == "cuda":
            torch.cuda.synchronize()
        expected = (shape.B, shape.T, shape.heads_in, shape.HD)
        if tuple(out.shape) != expected or out.dtype != tdtype:
            return f"returned {tuple(out.shape)} {out.dtype}, expected {expected} {tdtype}"
        return validate_output(self.device.to_storage(out, dtype), dout, shape, dtype, xp)

    def tensor_call(
        self, shape: Shape, dtype: DType, name: str, compile_mode: str | None
    ) -> tuple[Callable[[], Any], Any]:
        """The formulation's call on the pair's dout, compiled by its first call if compile_mode
        (then also returns that first call's record, else None)."""
        from tuner.runners.gpu import torch_peers

        dout, _ = self.session.buffers(shape, dtype)
        source = self.device.to_torch(dout, dtype)
        dims = (shape.B, shape.T, shape.NH, shape.NH_KV, shape.HD)
        fn = torch_peers.FORMULATIONS[name]
        if compile_mode is not None:
            fn = torch_peers.compile_formulation(fn, compile_mode, backend=self.compile_backend)

        def call() -> Any:
            return fn(source, *dims)

        first = torch_peers.first_call(call) if compile_mode is not None else None
        return call, first

    def tensor_launch(
        self, shape: Shape, dtype: DType, name: str, compile_mode: str | None
    ) -> Callable[[], Any]:
        call, _ = self.tensor_call(shape, dtype, name, compile_mode)
        self.require(self.check_tensor(shape, dtype, call))
        return call

    def tensor_peer(
        self, shape: Shape, dtype: DType, peer: str, kind: str, name: str, compile_mode: str | None = None
    ) -> None:
        """A PyTorch formulation returning dinp: compiled on its first call (if compile_mode),
        then validated on fresh input, then timed."""
        from tuner.runners.gpu import torch_peers

        extra: dict[str, Any] = {"config": f"mode={compile_mode}" if compile_mode else ""}
        try:
            call, first = self.tensor_call(shape, dtype, name, compile_mode)
            if first is not None:
                what = "compile default" if compile_mode == "default" else "compile max-autotune"
                self.budget.record(what, first.seconds)
                extra.update(compile_s=first.seconds, graphs=first.graphs, kernels=first.kernels)
            check = self.check_tensor(shape, dtype, call)
        except Exception as exc:
            message = recoverable(exc)
            status = "compile_error" if compile_mode is not None else "error"
            self.add(make_row(shape, dtype, peer, kind, status=status, message=message[:2000], **extra))
            return
        message = self.failure(check)
        if message is not None:
            self.add(make_row(shape, dtype, peer, kind, status="wrong_result", message=message, **extra))
            return
        graphs = torch_peers.graphs_compiled()
        timing = self.timed(call)
        notes = []
        if compile_mode is not None and extra.get("graphs") != 1:
            notes.append(f"first call compiled {extra.get('graphs')} graphs")
        if torch_peers.graphs_compiled() != graphs:
            notes.append(f"{torch_peers.graphs_compiled() - graphs} recompiles while timed")
        self.rebuilders[(shape.key, dtype.name, peer)] = lambda: self.tensor_launch(
            shape, dtype, name, compile_mode
        )
        self.timing_row(shape, dtype, peer, kind, timing, message="; ".join(notes), **extra)

    # --- the Triton peer ---
    def triton(self, shape: Shape, dtype: DType) -> None:
        """Autotuned on its first call (every config compiled and timed by Triton), then run
        once more through the session's check (fresh input, dinp poisoned), then timed."""
        try:
            from tuner.runners.gpu import triton_peer
        except ImportError as exc:
            self.add(make_row(shape, dtype, TRITON_PEER, TRITON, status="unavailable", message=str(exc)))
            return
        launch = self.triton_call(shape, dtype)
        config, seconds = "", float("nan")
        try:
            started = self.now()
            launch()
            if self.device.torch_device == "cuda":
                self.torch.cuda.synchronize()
            seconds = self.now() - started
            self.budget.record("triton", seconds)
            config = triton_peer.chosen_config()
            validation = self.session.run_checked(shape, dtype, launch)
        except Exception as exc:
            message = recoverable(exc)
            row = make_row(shape, dtype, TRITON_PEER, TRITON, status="compile_error", message=message[:2000])
            self.add({**row, "compile_s": seconds})
            return
        if not validation.ok:
            message = validation.summary()
            row = make_row(
                shape, dtype, TRITON_PEER, TRITON, status="wrong_result", message=message, config=config
            )
            self.add({**row, "compile_s": seconds})
            return
        self.rebuilders[(shape.key, dtype.name, TRITON_PEER)] = lambda: self.triton_launch(shape, dtype)
        self.timing_row(
            shape, dtype, TRITON_PEER, TRITON, self.timed(launch), config=config, compile_s=seconds
        )

    def triton_call(self, shape: Shape, dtype: DType) -> Callable[[], None]:
        from tuner.runners.gpu import triton_peer

        dout, dinp = self.session.buffers(shape, dtype)
        source, target = self.device.to_torch(dout, dtype), self.device.to_torch(dinp, dtype)
        dims = (shape.B, shape.T, shape.NH, shape.NH_KV, shape.HD)

        def launch() -> None:
            triton_peer.repkv_backward_triton(source, target, *dims)

        return launch

    def triton_launch(self, shape: Shape, dtype: DType) -> Callable[[], None]:
        launch = self.triton_call(shape, dtype)
        self.require(self.session.run_checked(shape, dtype, launch))
        return launch
