"""Ctrl-C, handled by the tuner rather than by whatever code it lands in.

Python's default SIGINT handler raises KeyboardInterrupt wherever the main thread happens to
be: inside Optuna's bookkeeping, a storage commit or a join of a heartbeat thread, which
leaves a trial or a lock half done. Instead, `sigint_stops(flag)` turns the first Ctrl-C into
a flag (`StopFlag`) that the study loop reads between trials and that the runners poll while
they wait (a replay's delay, the GPU worker's answer); the run then ends within about a
second, with every row it wrote readable, and exits 130. A second Ctrl-C runs the abort
callbacks (which kill child processes) and exits at once; once the run has stopped and
reported, a further Ctrl-C is ignored while the process exits with 130.

The handler only assigns attributes: it takes no lock, so it cannot deadlock with the code
it interrupts (an Event.set() in a handler can, if the main thread holds the Event's lock).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator

EXIT_INTERRUPTED = 130
POLL_S = 0.05  # how often a wait looks at the flag


class StopFlag:
    """A stop request: set by a signal handler or by code, polled by the loops."""

    def __init__(self) -> None:
        self._set = False
        self.reason = ""
        self.aborts: list[Callable[[], None]] = []  # what a second Ctrl-C kills before exiting

    def on_abort(self, kill: Callable[[], None]) -> None:
        self.aborts.append(kill)

    def abort(self) -> None:
        for kill in list(self.aborts):
            with contextlib.suppress(Exception):
                kill()

    def set(self, reason: str = "interrupted") -> None:
        self.reason = self.reason or reason
        self._set = True

    def is_set(self) -> bool:
        return self._set

    def __bool__(self) -> bool:
        return self._set

    def sleep(self, seconds: float) -> bool:
        """Sleep up to `seconds`, waking early when the flag is set. Returns whether it is."""
        deadline = time.monotonic() + max(0.0, seconds)
        while not self._set:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            time.sleep(min(POLL_S, left))
        return self._set


class TrialInterrupted(Exception):
    """Raised by a runner whose measurement was cut short by a stop request: the trial ends
    without a row (nothing was measured) and the run stops."""


@contextlib.contextmanager
def sigint_stops(
    flag: StopFlag,
    *,
    on_first: Callable[[], None] | None = None,
    on_abort: Callable[[], None] | None = None,
    message: str = "stopping after the current trial (Ctrl-C again to quit at once)",
) -> Iterator[StopFlag]:
    """Within the block, the first SIGINT (and SIGTERM) sets `flag` and calls `on_first`; a
    second SIGINT calls `on_abort` and exits the process with status 130. Outside the main
    thread this does nothing (signal handlers can only be installed there)."""
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return
    presses = 0

    def handler(signum: int, frame: object) -> None:
        nonlocal presses
        presses += 1
        if presses == 1:
            flag.set("interrupted" if signum == signal.SIGINT else "terminated")
            _say(f"\n{message}\n")
            if on_first is not None:
                on_first()
            return
        flag.abort()
        if on_abort is not None:
            with contextlib.suppress(Exception):
                on_abort()
        _say("interrupted again: quitting now\n")
        os._exit(EXIT_INTERRUPTED)

    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in previous:
        signal.signal(s, handler)
    try:
        yield flag
    finally:
        # Once a signal arrived the process is on its way out (flushing, interpreter shutdown)
        # with status 130 already decided, so a second Ctrl-C from here on is ignored. Python's
        # own handler would turn it into a KeyboardInterrupt traceback, and this handler would
        # not survive the shutdown either: the interpreter resets Python-level handlers to the
        # default there, which dies by SIGINT (-2). SIG_IGN is left alone. Otherwise restore.
        for s, h in previous.items():
            signal.signal(s, signal.SIG_IGN if presses and s == signal.SIGINT else h)


def _say(text: str) -> None:
    with contextlib.suppress(OSError):
        os.write(2, text.encode())
