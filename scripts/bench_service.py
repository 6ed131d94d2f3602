"""Benchmark of the results service on synthetic data (never real measurements).

Builds a store of >= 100,000 synthetic trials in a temporary directory, measures how long a
load takes, starts `python -m service` on it, and measures GET /best latency and throughput:
closed-loop (N clients, each sending its next request when the last one is answered) and
open-loop (a fixed request rate). Then runs the leave-one-out evaluation of nearest-shape
answers on an exhaustive synthetic store. Prints tables; writes nothing outside the
temporary directory.

`--mode exports` measures GET /best instead while export clients (each its own process, on
the same machine) loop on a large export, by default every row as JSON
(`/results?limit=1000000&format=json`, about 96 MB): first without them, then with them,
with the exports' throughput and the server's memory.

Output: the tables printed, nothing written; those of docs/service.md ("Its speed") come from
its runs on the 2-core development machine.

    python scripts/bench_service.py [--trials-per-shape 930] [--seconds 10]
    python scripts/bench_service.py --mode exports [--exports 4] [--export-path /results?...]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

import httpx
import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from results.leave_one_out import leave_one_out, summarize  # noqa: E402
from results.store import write_table  # noqa: E402
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


def request_bytes(params: dict[str, object]) -> bytes:
    return f"GET /best?{urlencode(params)} HTTP/1.1\r\nHost: bench\r\n\r\n".encode()


class Connection:
    """A keep-alive HTTP/1.1 connection with a minimal client (little CPU next to the server)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> Connection:
        return cls(*await asyncio.open_connection("127.0.0.1", port))

    async def get(self, request: bytes) -> int:
        self.writer.write(request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        await self.reader.readexactly(length)
        return int(head.split(b" ", 2)[1])

    def close(self) -> None:
        self.writer.close()

    async def answer(self, request: bytes, port: int) -> tuple[Connection, int]:
        """The status of the answer (0: the connection failed), and the connection to use next
        (a new one after a failure, e.g. closed by the server while it was starved)."""
        try:
            return self, await self.get(request)
        except (ConnectionError, asyncio.IncompleteReadError):
            self.close()
            return await Connection.open(port), 0


async def closed_loop(port: int, clients: int, seconds: float) -> tuple[list[float], int, float]:
    """`clients` connections, each sending its next request as soon as the last is answered."""
    latencies: list[float] = []
    errors = 0
    work = [request_bytes(q) for q in queries(2000)]
    deadline = time.perf_counter() + seconds

    async def client(k: int) -> None:
        nonlocal errors
        conn = await Connection.open(port)
        i = k
        while time.perf_counter() < deadline:
            t0 = time.perf_counter()
            conn, status = await conn.answer(work[i % len(work)], port)
            latencies.append(time.perf_counter() - t0)
            errors += status != 200
            i += clients
        conn.close()

    started = time.perf_counter()
    await asyncio.gather(*(client(k) for k in range(clients)))
    return latencies, errors, time.perf_counter() - started


async def open_loop(port: int, rate: float, seconds: float, pool: int = 32) -> tuple[list[float], int, float]:
    """Requests scheduled at a fixed rate over a pool of connections; latency counts from the
    scheduled time, so queueing behind a slow answer is included."""
    latencies: list[float] = []
    errors = 0
    work = [request_bytes(q) for q in queries(2000, seed=1)]
    idle: asyncio.Queue[Connection] = asyncio.Queue()
    for _ in range(pool):
        idle.put_nowait(await Connection.open(port))

    async def one(i: int, scheduled: float) -> None:
        nonlocal errors
        conn = await idle.get()
        conn, status = await conn.answer(work[i % len(work)], port)
        latencies.append(time.perf_counter() - scheduled)
        errors += status != 200
        idle.put_nowait(conn)

    tasks = []
    started = time.perf_counter()
    for i in range(int(rate * seconds)):
        scheduled = started + i / rate
        delay = scheduled - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(i, scheduled)))
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - started
    while not idle.empty():
        idle.get_nowait().close()
    return latencies, errors, elapsed


def export_client(port: int, path: str, stop, done, received, streaming) -> None:
    """Loop on GET `path` until `stop` is set, reading each answer to its end and throwing it
    away; counts whole answers in `done`, bytes in `received`, and itself in `streaming` once
    its first answer is under way."""
    request = f"GET {path} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n".encode()
    buffer = bytearray(1 << 20)
    first = True
    while not stop.is_set():
        with socket.create_connection(("127.0.0.1", port)) as conn:
            conn.sendall(request)
            while n := conn.recv_into(buffer):
                with received.get_lock():
                    received.value += n
                if first:
                    first = False
                    with streaming.get_lock():
                        streaming.value += 1
        with done.get_lock():
            done.value += 1


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """A process's resident memory (VmRSS now, VmHWM its peak) in MB, from /proc (Linux)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def exports_scenarios(port: int, pid: int, args: argparse.Namespace) -> None:
    """GET /best alone, then while `args.exports` processes loop on `args.export_path`."""
    print(f"server memory before: {rss_mb(pid):.0f} MB")
    header = ("scenario", "requests", "req/s", "p50 ms", "p99 ms", "max ms", "errors")
    print(f"{header[0]:<40} " + " ".join(f"{h:>8}" for h in header[1:]))
    scenarios = [(f"open loop {args.rate} req/s", lambda: open_loop(port, args.rate, args.seconds))]
    scenarios.append(("closed loop 1 client", lambda: closed_loop(port, 1, args.seconds)))
    scenarios.append(("closed loop 8 clients", lambda: closed_loop(port, 8, args.seconds)))
    for name, run in scenarios:
        print(row(f"{name}, no exports", *asyncio.run(run()), width=40))
    # spawned, not forked from this process and its synthetic store; measured once every one
    # is under way (a spawned client imports this script's modules first)
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    done, received, streaming = context.Value("l", 0), context.Value("q", 0), context.Value("l", 0)
    clients = [
        context.Process(target=export_client, args=(port, args.export_path, stop, done, received, streaming))
        for _ in range(args.exports)
    ]
    for client in clients:
        client.start()
    peak = 0.0
    try:
        deadline = time.time() + 60.0
        while streaming.value < args.exports and time.time() < deadline:
            time.sleep(0.1)  # every export under way
        time.sleep(1.0)
        started, bytes_before, done_before = time.time(), received.value, done.value
        for name, run in scenarios:
            print(row(f"{name}, {args.exports} exports", *asyncio.run(run()), width=40))
            peak = max(peak, rss_mb(pid))
        elapsed, megabytes = time.time() - started, (received.value - bytes_before) / 1e6
        answers = done.value - done_before
    finally:
        stop.set()
        for client in clients:
            client.terminate()  # mid-answer, most likely
            client.join(timeout=10)
    print(
        f"exports: {args.exports} clients looping on GET {args.export_path}: {megabytes:,.0f} MB in "
        f"{elapsed:.0f} s ({megabytes / elapsed:.1f} MB/s), {answers} whole answers"
    )
    high = rss_mb(pid, "VmHWM")
    print(f"server memory during the exports: {peak:.0f} MB (peak resident over the run: {high:.0f} MB)")


def row(name: str, latencies: list[float], errors: int, elapsed: float, width: int = 28) -> str:
    ms = np.array(latencies) * 1e3
    return (
        f"{name:<{width}} {len(ms):>8} {len(ms) / elapsed:>8.0f} {np.percentile(ms, 50):>8.2f} "
        f"{np.percentile(ms, 99):>8.2f} {ms.max():>8.2f} {errors:>6}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--trials-per-shape", type=int, default=930, help="random trials per GPU, shape and dtype"
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="duration of each load test")
    parser.add_argument("--access-log", action="store_true", help="let the server log every request")
    parser.add_argument(
        "--mode",
        choices=["best", "exports"],
        default="best",
        help="best: GET /best alone, then the leave-one-out evaluation; exports: GET /best while "
        "export clients loop on a large export",
    )
    parser.add_argument("--exports", type=int, default=4, help="export clients (--mode exports)")
    parser.add_argument(
        "--export-path",
        default="/results?limit=1000000&format=json",
        help="what each export client asks for (--mode exports)",
    )
    parser.add_argument("--rate", type=float, default=300, help="open-loop req/s of /best (--mode exports)")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="repkv-bench-") as tmp:
        directory = Path(tmp)
        t0 = time.perf_counter()
        frame = synthetic_frame(
            gpus=tuple(GPUS), dtypes=("bf16", "fp32", "fp16"), trials=args.trials_per_shape
        )
        for gpu, rows in frame.groupby("gpu"):
            write_table(rows, directory, f"synthetic-{gpu}")
        groups = frame.groupby(["gpu", "B", "T", "NH", "NH_KV", "HD", "dtype"]).ngroups
        print(
            f"synthetic store: {len(frame):,} trials, {groups} tuned shapes, written in "
            f"{time.perf_counter() - t0:.1f} s"
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
            asyncio.run(closed_loop(port, 4, 2.0))  # warm-up: fills the per-index answer memo
            print(f"\nGET /best against python -m service, {os.cpu_count()} cores shared with the client;")
            print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
            if args.mode == "exports":
                exports_scenarios(port, server.pid, args)
                return 0
            header = ("scenario", "requests", "req/s", "p50 ms", "p99 ms", "max ms", "errors")
            print(f"{header[0]:<28} " + " ".join(f"{h:>8}" for h in header[1:]))
            for rate in (100, 300, 500):
                print(row(f"open loop {rate} req/s", *asyncio.run(open_loop(port, rate, args.seconds))))
            for clients in (1, 8, 32):
                print(
                    row(
                        f"closed loop {clients} clients",
                        *asyncio.run(closed_loop(port, clients, args.seconds)),
                    )
                )
        finally:
            server.terminate()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()

    exhaustive = synthetic_frame(gpus=tuple(GPUS), dtypes=("bf16", "fp32", "fp16"), trials=None, seed=3)
    table = leave_one_out(exhaustive)
    s = summarize(table)
    print(
        f"\nleave-one-out on an exhaustive synthetic store ({len(exhaustive):,} trials, "
        f"{s.shapes} tuned shapes):"
    )
    print(
        f"  answered {s.answered}/{s.shapes}; served configuration measured at the held-out shape: "
        f"{s.measured}"
    )
    print(
        f"  slow-down vs the real optimum: median {s.median_slowdown:.3f}x, worst {s.worst_slowdown:.3f}x, "
        f"within 5%: {s.within_5_percent}/{s.measured}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
