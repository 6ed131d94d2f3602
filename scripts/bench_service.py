"""Benchmark of the results service on synthetic data (never real measurements).

Builds a store of >= 100,000 synthetic trials in a temporary directory, measures how long a
load takes, starts `python -m service` on it, and measures GET /best latency and throughput:
closed-loop (N clients, each sending its next request when the last one is answered) and
open-loop (a fixed request rate). Then runs the leave-one-out evaluation of nearest-shape
answers on an exhaustive synthetic store. Prints tables; writes nothing outside the
temporary directory.

    python scripts/bench_service.py [--trials-per-shape 930] [--seconds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from results.store import write_table  # noqa: E402
from service.leave_one_out import leave_one_out, summarize  # noqa: E402
from service.live_store import ResultsStore  # noqa: E402
from service.synthetic import GPUS, synthetic_frame  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def queries(count: int, seed: int = 0) -> list[dict[str, object]]:
    """A mix of requests: half exactly tuned shapes, half shapes answered by the nearest."""
    rng = random.Random(seed)
    out: list[dict[str, object]] = []
    for i in range(count):
        if i % 2:
            out.append(
                {"B": rng.choice([1, 4, 8, 16]), "T": rng.choice([1024, 2048]), "gpu": rng.choice(list(GPUS))}
            )
        else:
            out.append(
                {
                    "B": rng.randint(1, 64),
                    "T": rng.choice([128, 500, 777, 4096, 8192]),
                    "NH": 32,
                    "NH_KV": rng.choice([1, 2, 4, 8]),
                    "dtype": rng.choice(["bf16", "fp32", "fp16"]),
                    "gpu": rng.choice(list(GPUS)),
                }
            )
    return out


async def closed_loop(url: str, clients: int, seconds: float) -> tuple[list[float], int, float]:
    latencies: list[float] = []
    errors = 0
    work = queries(2000)
    deadline = time.perf_counter() + seconds

    async def client(k: int) -> None:
        nonlocal errors
        async with httpx.AsyncClient(base_url=url, timeout=10) as http:
            i = k
            while time.perf_counter() < deadline:
                t0 = time.perf_counter()
                r = await http.get("/best", params=work[i % len(work)])
                latencies.append(time.perf_counter() - t0)
                errors += r.status_code != 200
                i += clients

    started = time.perf_counter()
    await asyncio.gather(*(client(k) for k in range(clients)))
    return latencies, errors, time.perf_counter() - started


async def open_loop(url: str, rate: float, seconds: float) -> tuple[list[float], int, float]:
    latencies: list[float] = []
    errors = 0
    work = queries(2000, seed=1)
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    async with httpx.AsyncClient(base_url=url, timeout=10, limits=limits) as http:

        async def one(i: int) -> None:
            nonlocal errors
            t0 = time.perf_counter()
            r = await http.get("/best", params=work[i % len(work)])
            latencies.append(time.perf_counter() - t0)
            errors += r.status_code != 200

        tasks = []
        started = time.perf_counter()
        for i in range(int(rate * seconds)):
            delay = started + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(i)))
        await asyncio.gather(*tasks)
    return latencies, errors, time.perf_counter() - started


def row(name: str, latencies: list[float], errors: int, elapsed: float) -> str:
    ms = np.array(latencies) * 1e3
    return (
        f"{name:<28} {len(ms):>8} {len(ms) / elapsed:>9.0f} {np.percentile(ms, 50):>8.2f} "
        f"{np.percentile(ms, 99):>8.2f} {ms.max():>8.2f} {errors:>6}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--trials-per-shape", type=int, default=930, help="random trials per GPU, shape and dtype"
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="duration of each load test")
    parser.add_argument("--access-log", action="store_true", help="let the server log every request")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="repkv-bench-") as tmp:
        directory = Path(tmp)
        t0 = time.perf_counter()
        frame = synthetic_frame(
            gpus=tuple(GPUS), dtypes=("bf16", "fp32", "fp16"), trials=args.trials_per_shape
        )
        for gpu, rows in frame.groupby("gpu"):
            write_table(rows, directory, f"synthetic-{gpu}")
        print(
            f"synthetic store: {len(frame):,} trials, {frame.groupby(['gpu', 'B', 'T', 'NH', 'NH_KV', 'HD', 'dtype']).ngroups} "
            f"tuned shapes, written in {time.perf_counter() - t0:.1f} s"
        )
        store = ResultsStore(directory)
        loads = []
        for _ in range(3):
            t0 = time.perf_counter()
            store.refresh(force=True)
            loads.append(time.perf_counter() - t0)
        print(f"load (read parquet + build index): median {sorted(loads)[1]:.2f} s of 3")

        port = free_port()
        url = f"http://127.0.0.1:{port}"
        command = [
            sys.executable,
            "-m",
            "service",
            "--results-dir",
            tmp,
            "--port",
            str(port),
            "--log-level",
            "warning",
        ]
        if not args.access_log:
            command.append("--no-access-log")
        server = subprocess.Popen(command, cwd=REPO, env={**os.environ})
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline or server.poll() is not None:
                    print("the server did not become ready", file=sys.stderr)
                    return 1
                time.sleep(0.2)
            asyncio.run(closed_loop(url, 4, 2.0))  # warm-up: fills the per-index answer memo
            print(
                f"\nGET /best against python -m service on {os.cpu_count()} cores (client on the same machine)"
            )
            print(
                f"{'scenario':<28} {'requests':>8} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'errors':>6}"
            )
            for rate in (100, 300, 500):
                print(row(f"open loop {rate} req/s", *asyncio.run(open_loop(url, rate, args.seconds))))
            for clients in (1, 8, 32):
                print(
                    row(
                        f"closed loop {clients} clients",
                        *asyncio.run(closed_loop(url, clients, args.seconds)),
                    )
                )
        finally:
            server.terminate()
            server.wait(timeout=10)

    exhaustive = synthetic_frame(gpus=tuple(GPUS), dtypes=("bf16", "fp32", "fp16"), trials=None, seed=3)
    table = leave_one_out(exhaustive)
    s = summarize(table)
    print(
        f"\nleave-one-out on an exhaustive synthetic store ({len(exhaustive):,} trials, {s.shapes} tuned shapes):"
    )
    print(
        f"  answered {s.answered}/{s.shapes}; served configuration measured at the held-out shape: {s.measured}"
    )
    print(
        f"  slow-down vs the real optimum: median {s.median_slowdown:.3f}x, worst {s.worst_slowdown:.3f}x, "
        f"within 5%: {s.within_5_percent}/{s.measured}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
