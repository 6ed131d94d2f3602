"""The peers benchmark's passes after the first (methods of `PeerBench`,
bench_kernels_parts.loop): torch.compile in max-autotune mode, closest races first while the
budget lasts; head to head, the tuned kernel and each pair's fastest peer in interleaved
rounds; and the device time, the profiled pass."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tuner.peers.names import (
    COMPILED,
    COPY_PEER,
    DEVICE_CALLS,
    DEVICE_PEERS,
    EMPTY_PEER,
    H2H_ROUNDS,
    HEAD_TO_HEAD,
    PEER_KINDS,
    STATUS_OK,
    TUNED_PEER,
    compile_peer,
    head_to_head_peer,
)
from tuner.peers.rows import make_row
from variants import DType, Shape

from .device import recoverable

MAX_AUTOTUNE_MODE = "max-autotune-no-cudagraphs"


class LaterPasses:
    """The passes after the first, mixed into PeerBench."""

    def closeness(self, shape: Shape, dtype: DType) -> float:
        """The fastest peer measured so far over the tuned kernel (lower: a closer race)."""
        rows = [r for r in self.rows if r["shape"] == shape.key and r["dtype"] == dtype.name]
        ok = [r for r in rows if r["status"] == STATUS_OK]
        tuned = [r["time_ms"] for r in ok if r["peer"] == TUNED_PEER]
        peers = [r["time_ms"] for r in ok if r["kind"] in PEER_KINDS]
        if not tuned or not peers:
            return float("inf")
        return min(peers) / tuned[0]

    def second_pass(self) -> None:
        """max-autotune: each formulation in turn, the closest races first, while the budget
        lasts (the others get rows with status 'skipped')."""
        order = sorted(self.plan.pairs, key=lambda pair: self.closeness(*pair))
        for name in self.plan.max_autotune:
            peer = compile_peer(MAX_AUTOTUNE_MODE, name)
            for i, (shape, dtype) in enumerate(order, 1):
                if not self.budget.allows("compile max-autotune", self.now()):
                    self.skipped(shape, dtype, peer, COMPILED, "compile max-autotune")
                    continue
                self.say(f"{peer} {i}/{len(order)}: {shape.key} {dtype.name}")
                self.tensor_peer(shape, dtype, peer, COMPILED, name, compile_mode=MAX_AUTOTUNE_MODE)
                self.release()
            self.write()

    def head_to_head(self, shape: Shape, dtype: DType) -> None:
        """The tuned kernel and the pair's fastest peer, each rebuilt and validated again, then
        timed in H2H_ROUNDS rounds that alternate which goes first; each side's row is its
        median round (the round whose median is the median of the rounds', so that no one round
        decides), every round's median listed in its config."""
        rows = [r for r in self.rows if r["shape"] == shape.key and r["dtype"] == dtype.name]
        ok = [r for r in rows if r["status"] == STATUS_OK]
        peers = [r for r in ok if r["kind"] in PEER_KINDS]
        if not peers or not any(r["peer"] == TUNED_PEER for r in ok):
            return
        fastest = min(peers, key=lambda r: r["time_ms"])["peer"]
        sides = [TUNED_PEER, fastest]
        launches = {}
        for side in sides:
            try:
                launches[side] = self.rebuilders[(shape.key, dtype.name, side)]()
            except Exception as exc:
                message = recoverable(exc)
                for name in sides:
                    peer = head_to_head_peer(name)
                    self.add(
                        make_row(shape, dtype, peer, HEAD_TO_HEAD, status="error", message=message[:2000])
                    )
                self.release()
                return
        medians: dict[str, list[Any]] = {side: [] for side in sides}
        for round_ in range(H2H_ROUNDS):
            for side in sides if round_ % 2 == 0 else sides[::-1]:
                medians[side].append(self.timed(launches[side]))
        for side in sides:
            middle = sorted(medians[side], key=lambda t: t.median_ms)[len(medians[side]) // 2]
            listed = ", ".join(f"{t.median_ms:.4f}" for t in medians[side])
            self.timing_row(
                shape, dtype, head_to_head_peer(side), HEAD_TO_HEAD, middle, config=f"round medians {listed}"
            )
        self.release()

    def device_time(self, shape: Shape, dtype: DType) -> None:
        """The profiled pass (tuner.runners.kernel_trace): the copy, the empty launch, the tuned kernel
        and the DEVICE_PEERS fastest peers by event time, rebuilt and validated again, then
        DEVICE_CALLS flushed calls of each under the profiler; each one's first-pass row gets
        the GPU time of its own kernels and copies per call (median, p20, p80) and their count.
        A side that cannot be rebuilt is left out; a failed trace leaves every row as it was."""
        from tuner.runners.kernel_trace import device_times

        if self.device.trace_calls is None or self.device.copy_launch is None:
            return
        rows = {
            r["peer"]: r
            for r in self.rows
            if r["shape"] == shape.key and r["dtype"] == dtype.name and r["status"] == STATUS_OK
        }
        if TUNED_PEER not in rows:
            return
        peers = sorted((r for r in rows.values() if r["kind"] in PEER_KINDS), key=lambda r: r["time_ms"])
        sides: dict[str, Callable[[], Any]] = {}
        try:
            if COPY_PEER in rows:
                method = self.copy_methods[(shape.key, dtype.name)]  # set with the copy row
                sides[COPY_PEER] = self.device.copy_launch(shape.bytes_moved(dtype) // 2, method)
            if EMPTY_PEER in rows:
                sides[EMPTY_PEER] = self.device.empty_launch
            for peer in [TUNED_PEER, *(r["peer"] for r in peers[:DEVICE_PEERS])]:
                rebuild = self.rebuilders.get((shape.key, dtype.name, peer))
                if rebuild is None:
                    continue
                try:
                    sides[peer] = rebuild()
                except Exception as exc:
                    message = recoverable(exc)
                    self.say(f"device time: {shape.key} {dtype.name} {peer} left out: {message[:300]}")
            names = list(sides)
            times = device_times(
                self.device.trace_calls(sides, self.session.timing_flush(), DEVICE_CALLS), names, DEVICE_CALLS
            )
        except Exception as exc:
            message = recoverable(exc)
            self.say(f"device time: {shape.key} {dtype.name}: not measured: {message[:300]}")
            self.release()
            return
        for name, t in times.items():
            rows[name].update(
                device_us=t.median_us,
                device_p20_us=t.p20_us,
                device_p80_us=t.p80_us,
                device_kernels=t.kernels,
            )
        self.release()
