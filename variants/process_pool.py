"""Jobs spread over spawned worker processes that stop with their caller: at once on Ctrl-C or
an error (not after the jobs they hold), and however the caller ends. NVRTC's compilations
(`variants.nvrtc.compile_all`) run here."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import TypeVar

Job = TypeVar("Job")
Result = TypeVar("Result")


def usable_cores() -> int:
    """The cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def in_processes(
    run: Callable[[Job], Result],
    jobs: Sequence[Job],
    workers: int,
    warm: Callable[[], object] | None = None,
) -> Iterator[Result]:
    """`run(job)` of each job, as each ends: here for one job or one worker, else in a pool of
    at most `workers` processes, spawned (the caller may run threads, as a progress bar does),
    each calling `warm()` first. `run` and `warm` are module-level functions (they travel by
    name), and a script that calls this guards its own start with `if __name__ == "__main__":`."""
    if workers <= 1 or len(jobs) <= 1:
        yield from map(run, jobs)
        return
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(
        min(workers, len(jobs)), mp_context=context, initializer=_worker_start, initargs=(warm,)
    )
    try:
        for future in as_completed([pool.submit(run, job) for job in jobs]):
            yield future.result()
    except BaseException:
        _stop(pool)  # Ctrl-C or an error here: the workers stop now, not after their jobs
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _stop(pool: ProcessPoolExecutor) -> None:
    terminate = getattr(pool, "terminate_workers", None)  # Python 3.14
    if terminate is not None:
        terminate()
        return
    processes = list((getattr(pool, "_processes", None) or {}).values())  # before shutdown drops it
    for process in processes:
        process.terminate()
    pool.shutdown(wait=False, cancel_futures=True)


def _worker_start(warm: Callable[[], object] | None) -> None:
    """A worker leaves Ctrl-C to its parent, which stops the pool, and ends when its parent
    does, however that ends (a worker would otherwise wait for work forever)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()
    if warm is not None:
        warm()
