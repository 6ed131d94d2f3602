"""The load on GET /best: a mix of requests, minimal keep-alive HTTP/1.1 clients, closed loop
(N clients, each sending its next request when the last one is answered) and open loop (a
fixed request rate), and the line a scenario prints (requests, req/s, latency percentiles)."""

from __future__ import annotations

import asyncio
import random
import time
from urllib.parse import urlencode

import numpy as np

from service.synthetic import GPUS


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


def row(name: str, latencies: list[float], errors: int, elapsed: float, width: int = 28) -> str:
    ms = np.array(latencies) * 1e3
    return (
        f"{name:<{width}} {len(ms):>8} {len(ms) / elapsed:>8.0f} {np.percentile(ms, 50):>8.2f} "
        f"{np.percentile(ms, 99):>8.2f} {ms.max():>8.2f} {errors:>6}"
    )
