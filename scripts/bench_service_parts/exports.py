"""GET /best while export clients (each its own process, on the same machine) loop on a large
export: first without them, then with them, with the exports' throughput and the server's
memory (`--mode exports`)."""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import socket
import time
from pathlib import Path

from .load import closed_loop, open_loop, row


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
