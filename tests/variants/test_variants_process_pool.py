"""Jobs over spawned worker processes (variants.process_pool), as NVRTC's compilations run."""

from __future__ import annotations

import math
import os

import pytest

from variants.process_pool import in_processes, usable_cores


def test_each_jobs_result_comes_back_from_the_workers() -> None:
    jobs = list(range(2, 12))
    results = list(in_processes(math.factorial, jobs, workers=2, warm=os.getpid))
    assert sorted(results) == sorted(math.factorial(n) for n in jobs)


def test_one_worker_or_one_job_runs_here_in_order() -> None:
    assert list(in_processes(math.isqrt, [16, 9, 4], workers=1)) == [4, 3, 2]
    assert list(in_processes(math.isqrt, [25], workers=4)) == [5]


def test_a_jobs_error_reaches_the_caller_and_the_pool_stops() -> None:
    with pytest.raises(ValueError, match="math domain error"):
        list(in_processes(math.sqrt, [4.0, -1.0, 9.0, 16.0], workers=2))


def test_the_cores_usable_are_at_least_one() -> None:
    assert usable_cores() >= 1
