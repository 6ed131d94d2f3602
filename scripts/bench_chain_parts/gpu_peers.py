"""How the chain benchmark builds and checks each peer on the GPU (`Peers`, mixed into
bench_chain_parts.gpu.Case): llm.c's kernels, the store's configurations, the torch.compile'd
chain, and the check every peer passes before it is timed."""

from __future__ import annotations

import dataclasses
import math
import types
from collections.abc import Callable
from typing import Any

import cupy as cp
import numpy as np
import torch

from tuner.runners.gpu.kernels import Kernels
from tuner.runners.gpu.peers import as_storage, as_torch
from tuner.runners.gpu.session import STICKY_ERRORS, DeviceSession
from tuner.runners.gpu.timing import time_launches
from tuner.runners.gpu.torch_peers import first_call
from variants import Config, DType, Shape
from variants.compile_cupy import CompileError
from variants.reference import nan_bits, op_inputs, validate_output
from variants.repkv_rope_backward import llmc_chain_tolerance

from .llmc import rope_grid, rope_reject
from .plan import Pair, compile_peer
from .report import make_row
from .torch_chain import CHAINS, TORCH_DTYPES

Launch = Callable[[], Any]


class Unavailable(Exception):
    """A peer that cannot serve this shape (the message says why)."""


class Failed(Exception):
    """A peer built but failed: `status` is the row's (wrong_result, compile_error)."""

    def __init__(self, status: str, message: str):
        super().__init__(message)
        self.status = status


def fresh_function(fn: Callable, tag: str) -> Callable:
    """fn with a code object of its own, so that each compile mode keeps its own Dynamo cache."""
    code = fn.__code__.replace(co_name=f"{fn.__name__}_{tag.replace('-', '_')}")
    return types.FunctionType(code, fn.__globals__, code.co_name, fn.__defaults__, fn.__closure__)


class Peers:
    """One (pair, shape, dtype) on the fused op's buffers of `session`."""

    def __init__(
        self,
        bench: Any,
        session: DeviceSession,
        repkv: Kernels,
        rope: Any,
        pair: Pair,
        shape: Shape,
        dtype: DType,
    ):
        self.bench, self.session, self.repkv_kernels, self.rope_function = bench, session, repkv, rope
        self.pair, self.shape, self.dtype = pair, shape, dtype
        self.op = pair.op
        # llm.c's backward chain rounds each rotated replica before the sum: its own tolerance
        self.chain_op = self.op
        if pair.backward:
            self.chain_op = dataclasses.replace(self.op, tolerance=llmc_chain_tolerance)
        self.inputs, self.out = session.op_buffers(shape, dtype)
        self.flush = session.flush

    def row(self, peer: str, kind: str, **fields: Any) -> None:
        run = {"run_id": self.bench.run_id, "gpu_name": self.bench.gpu_name}
        self.bench.rows.append(make_row(self.pair, self.shape, self.dtype, peer, kind, **run, **fields))

    def time(self, launch: Launch) -> Any:
        """The median (and p20, p80) of --reps calls, each after an L2 flush and the hold."""
        return time_launches(launch, self.flush, reps=self.bench.plan.reps)

    # --- the check every peer passes before it is timed ---
    def check(self, launch: Launch, op: Any) -> None:
        """Fresh inputs (freqs_cis as the op defines it), the output poisoned with NaN, one call,
        then every element of its output (the session's buffer, or the tensor it returns)
        against the float64 reference of the inputs as they were before the call (the backward
        chains rotate dout in place). Raises Failed('wrong_result') with the validator's words."""
        fresh = op_inputs(self.op, self.shape, self.dtype, cp)
        for buffer, values in zip(self.inputs, fresh, strict=True):
            buffer[...] = values
        self.out.view(cp.uint32 if self.dtype.itemsize == 4 else cp.uint16).fill(nan_bits(self.dtype))
        result = launch()
        cp.cuda.get_current_stream().synchronize()
        got = self.out
        if result is not None:
            expected = TORCH_DTYPES[self.dtype.name]
            numel = self.op.output.numel(self.shape)
            if result.numel() != numel or result.dtype != expected:
                found = f"{tuple(result.shape)} {result.dtype}"
                raise Failed("wrong_result", f"returned {found}, expected {numel} elements of {expected}")
            got = as_storage(result, self.dtype)
        validation = validate_output(got, fresh, self.shape, self.dtype, cp, op=op)
        if not validation.ok:
            raise Failed("wrong_result", validation.summary())

    def attempt(
        self, peer: str, kind: str, build: Callable[[], tuple[Launch, str]], op: Any
    ) -> Launch | None:
        """Build a peer (its launch and configuration) and check it: the launch, or None after a
        row saying why not. A CUDA error that loses the context ends the run."""
        config = ""
        try:
            launch, config = build()
            self.check(launch, op)
            return launch
        except Unavailable as exc:
            self.row(peer, kind, status="unavailable", message=str(exc), config=config)
        except CompileError as exc:
            self.row(peer, kind, status="compile_error", message=str(exc)[:2000], config=config)
        except Failed as exc:
            self.row(peer, kind, status=exc.status, message=str(exc)[:2000], config=config)
        except Exception as exc:
            message = f"{type(exc).__name__}: {exc}"
            if any(marker in message for marker in STICKY_ERRORS):
                raise
            self.row(peer, kind, status="error", message=message[:2000], config=config)
        return None

    # --- llm.c's kernels and the project's ---
    def repkv_k1(self, block: int | None) -> Launch:
        """llm.c's repkv kernel1 at `block`; None: the cudaMemcpy of out's bytes that llm.c's
        repkv_forward does instead at nrep 1."""
        if block is None:
            nbytes = self.out.nbytes
            src, dst, stream = self.inputs[0], self.out, cp.cuda.get_current_stream()
            kind = cp.cuda.runtime.memcpyDeviceToDevice

            def memcpy() -> None:
                cp.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, nbytes, kind, stream.ptr)

            return memcpy
        return self.repkv_config(Config.of("naive", block=block))

    def repkv_config(self, config: Config) -> Launch:
        """A configuration of the chain's repkv op: out from inp, or dinp from dout."""
        family = self.repkv_kernels.families[config.family]
        reason = family.rejection(self.shape, self.dtype, config)
        if reason is not None:
            raise Unavailable(f"{config.key}: {reason}")
        sm_count = self.session.identity.sm_count
        return self.repkv_kernels.launcher(self.shape, self.dtype, config, sm_count, self.out, self.inputs[0])

    def rope(self, block: int) -> Launch:
        """llm.c's rope_forward (in place on the replicated out) or rope_backward_inplace (in
        place on dout), at `block`."""
        reason = rope_reject(self.shape, block)
        if reason is not None:
            raise Unavailable(f"llm.c rope: {reason}")
        target = self.inputs[0] if self.pair.backward else self.out
        ints = tuple(np.int32(v) for v in (self.shape.B, self.shape.T, self.shape.NH, self.shape.HD))
        args = (target, target, self.inputs[1], *ints)
        grid, function = (rope_grid(self.shape, block),), self.rope_function

        def launch() -> None:
            function(grid, (block,), args)

        return launch

    def chain(self, repkv: Launch, rope: Launch) -> Launch:
        """llm.c's order: repkv_forward then rope_forward; rope_backward_inplace then repkv_backward."""
        first, second = (rope, repkv) if self.pair.backward else (repkv, rope)

        def launch() -> None:
            first()
            second()

        return launch

    # --- torch.compile ---
    def compiled(self, mode: str, record: dict[str, Any]) -> tuple[Launch, str]:
        """torch.compile of the PyTorch chain on the session's inputs, compiled by its first call.
        Returns the check's call (its output allocated where NaN was just freed); the call to
        time, and the compile's seconds, go into `record`."""
        fn = fresh_function(CHAINS[self.pair.fused], mode)
        options = {} if mode == "default" else {"mode": mode}
        compiled = torch.compile(fn, dynamic=False, fullgraph=True, **options)
        x, freqs = as_torch(self.inputs[0], self.dtype), as_torch(self.inputs[1], self.dtype)
        dims = (self.shape.B, self.shape.T, self.shape.NH, self.shape.NH_KV, self.shape.HD)

        def call() -> torch.Tensor:
            return compiled(x, freqs, *dims)

        try:
            first = first_call(call)
        except Exception as exc:
            raise Failed("compile_error", f"{type(exc).__name__}: {exc}") from exc
        record.update(call=call, compile_s=first.seconds)
        self.bench.say(f"  {compile_peer(mode)}: compiled in {first.seconds:.1f} s, {first.kernels} kernels")
        numel = self.op.output.numel(self.shape)
        kind = TORCH_DTYPES[self.dtype.name]

        def poisoned_call() -> torch.Tensor:
            poison = torch.full((numel,), math.nan, dtype=kind, device="cuda")
            del poison
            return call()

        return poisoned_call, f"mode={mode}, dynamic=False"
