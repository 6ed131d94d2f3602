"""The worker process: owns the CUDA context and answers requests over a pipe.

Requests: ("measure", shape, dtype, config) -> ("compiled",) then ("result", Measurement);
("copy", shape, dtype) -> ("result", ms); ("prepare", [(shape, dtype, config)]) ->
("result", failures); ("stop",). After an error that poisons the context the worker answers
with the crash measurement and exits, so the parent starts a fresh one.
"""

from __future__ import annotations

import os
import signal
import traceback
from collections.abc import Mapping
from multiprocessing.connection import Connection

from results.schema import DEFAULT_HOLD_US, L2_COLD
from variants import Family


def serve(
    conn: Connection,
    device: int,
    families: Mapping[str, Family] | None,
    reps: int,
    hold_us: float = DEFAULT_HOLD_US,
    l2: str = L2_COLD,
) -> None:
    # Ctrl-C in the terminal reaches the whole process group: the parent decides (it stops
    # between trials, or kills this process on a second Ctrl-C); a trial is never cut here.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from tuner.runners.gpu.session import DeviceSession, StickyCudaError

    try:
        session = DeviceSession(device, families, reps=reps, hold_us=hold_us, l2=l2)
    except Exception:
        conn.send(("error", traceback.format_exc()))
        return
    conn.send(("ready", session.identity))
    while True:
        try:
            request = conn.recv()
        except EOFError:
            return
        op, args = request[0], request[1:]
        try:
            if op == "stop":
                return
            if op == "measure":
                result = session.measure(*args, on_compiled=lambda: conn.send(("compiled",)))
            elif op == "copy":
                result = session.copy_ms(*args)
            elif op == "prepare":
                (work,) = args
                result = session.kernels.prepare(
                    (session.families[c.family], session.families[c.family].name_expression(s, d, c))
                    for s, d, c in work
                )
            else:
                raise ValueError(f"unknown request {op!r}")
        except StickyCudaError as exc:
            conn.send(("result", exc.measurement))
            conn.close()
            os._exit(3)  # the context is poisoned: never run another kernel in it
        except Exception:
            conn.send(("error", traceback.format_exc()))
            continue
        conn.send(("result", result))
