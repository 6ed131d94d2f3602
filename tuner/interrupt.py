"""Ctrl-C, handled by the tuner rather than by whatever code it lands in.

Python's default SIGINT handler raises KeyboardInterrupt wherever the main thread happens to
be: inside an import (a traceback, and a death by SIGINT), Optuna's bookkeeping, a storage
commit or a join of a heartbeat thread, which leaves a trial or a lock half done. Instead:

- `quits_at_once()` holds from the command's first line: where nothing is half done that a
  stop would finish (imports, reading results, a run's start), Ctrl-C or SIGTERM ends the
  process at once with one line and status 130;
- `sigint_stops(flag)` holds while a run runs. While its trials run (`flag.finishing()`), the
  first Ctrl-C becomes a flag (`StopFlag`) that the study loop reads between trials and that
  the runners poll while they wait (a replay's delay, the GPU worker's answer); the run then
  ends within about a second, with every row it wrote readable, and exits 130. A Ctrl-C
  outside its trials, or a second one, runs the abort callbacks (which kill child processes)
  and exits at once; once the run has stopped and reported, a further Ctrl-C is ignored while
  the process exits with 130.

A signal ignored when the process started stays ignored: a script's `tuner ... &` (which
starts with SIGINT ignored, so that the Ctrl-C meant for the script's foreground spares it) is
stopped by SIGTERM, which every handler here treats as a Ctrl-C.

The handlers only assign attributes: they take no lock, so they cannot deadlock with the
code they interrupt (an Event.set() in a handler can, if the main thread holds its lock).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator

TYPE_CHECKING = False  # typing is not imported: the start-up handler waits for nothing it need not
if TYPE_CHECKING:
    from typing import NoReturn

EXIT_INTERRUPTED = 130
POLL_S = 0.05  # how often a wait looks at the flag
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopFlag:
    """A stop request: set by a signal handler or by code, polled by the loops."""

    def __init__(self) -> None:
        self._set = False
        self.reason = ""
        self.aborts: list[Callable[[], None]] = []  # what a second Ctrl-C kills before exiting
        self._finishing = 0  # trials running: a first Ctrl-C lets them finish (`finishing`)

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

    @contextlib.contextmanager
    def finishing(self) -> Iterator[None]:
        """While trials run: under `sigint_stops(..., at_once_outside=True)` a first Ctrl-C
        within lets them finish; outside, there is nothing to finish and it quits at once."""
        self._finishing += 1
        try:
            yield
        finally:
            self._finishing -= 1

    @property
    def in_trials(self) -> bool:
        return self._finishing > 0

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


class TrialInterrupted(Exception):  # control flow, not an error: never caught as RepkvTuneError
    """Raised by a runner whose measurement was cut short by a stop request: the trial ends
    without a row (nothing was measured) and the run stops."""


def quit_now(
    flag: StopFlag | None = None, on_abort: Callable[[], None] | None = None, line: str = "interrupted"
) -> NoReturn:
    """Kill what `flag` and `on_abort` started, say `line` and exit 130, now."""
    if flag is not None:
        flag.abort()
    if on_abort is not None:
        with contextlib.suppress(Exception):
            on_abort()
    _say(f"{line}\n")
    os._exit(EXIT_INTERRUPTED)


def _quit_handler(signum: int, frame: object) -> None:
    quit_now()


@contextlib.contextmanager
def quits_at_once(*, for_good: bool = False) -> Iterator[None]:
    """Within the block Ctrl-C and SIGTERM end the process at once (one line, status 130);
    a signal ignored since the start stays ignored. Outside the main thread this does nothing.

    With `for_good` (the command's entry point) the handler stays after the block, while the
    interpreter exits (joining threads, the atexit callbacks); the last atexit callback then
    ignores both signals, as the interpreter's finalization would otherwise reset the handler
    to the default, under which a Ctrl-C kills the process by SIGINT (status -2)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    for s, h in previous.items():
        if h is not signal.SIG_IGN:
            signal.signal(s, _quit_handler)
    if for_good:
        atexit.register(_ignore_stop_signals)  # registered first, so called last
    try:
        yield
    finally:
        if not for_good:
            for s, h in previous.items():
                signal.signal(s, h)


@contextlib.contextmanager
def held_back() -> Iterator[None]:
    """Within the block Ctrl-C and SIGTERM wait (they are acted on when it ends, never lost),
    and the processes started in it start with them held back: a Ctrl-C meant for this one
    cannot reach a worker that is still importing, before it could ignore it."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def leave_it_to_the_parent() -> None:
    """In a worker process of this one (a process pool's, started in `held_back()`): a Ctrl-C,
    which reaches the whole process group, is for the parent to handle, and the worker ends
    once the parent is gone (the parent may quit at once, with no time to stop its pool)."""
    parent = os.getppid()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(POLL_S * 4)
        os._exit(EXIT_INTERRUPTED)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _ignore_stop_signals() -> None:
    for s in STOP_SIGNALS:
        with contextlib.suppress(ValueError, OSError):
            signal.signal(s, signal.SIG_IGN)


@contextlib.contextmanager
def sigint_stops(
    flag: StopFlag,
    *,
    on_first: Callable[[], None] | None = None,
    on_abort: Callable[[], None] | None = None,
    message: str = "stopping after the current trial (Ctrl-C again to quit at once)",
    at_once_outside: bool = False,
) -> Iterator[StopFlag]:
    """Within the block, the first SIGINT (or SIGTERM) sets `flag` and calls `on_first`; a
    second one calls `on_abort` and exits the process with status 130. With `at_once_outside`
    the first one does so too unless trials run (`flag.finishing()`): a run's start and end
    have nothing to finish. A signal ignored since the start stays ignored. Outside the main
    thread this does nothing (signal handlers can only be installed there)."""
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return
    presses = 0

    def handler(signum: int, frame: object) -> None:
        nonlocal presses
        presses += 1
        if presses == 1 and (flag.in_trials or not at_once_outside):
            flag.set("interrupted" if signum == signal.SIGINT else "terminated")
            _say(f"\n{message}\n")
            if on_first is not None:
                on_first()
            return
        quit_now(flag, on_abort, "interrupted again: quitting now" if presses > 1 else "interrupted")

    previous = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    for s, h in previous.items():
        if h is not signal.SIG_IGN:
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
            if h is not signal.SIG_IGN:
                signal.signal(s, signal.SIG_IGN if presses and s == signal.SIGINT else h)


def _say(text: str) -> None:
    with contextlib.suppress(OSError):
        os.write(2, text.encode())
