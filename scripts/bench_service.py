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
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # its parts, also when loaded from its path

from bench_service_parts.exports import exports_scenarios  # noqa: E402
from bench_service_parts.load import closed_loop, open_loop, row  # noqa: E402

from results.leave_one_out import leave_one_out, summarize  # noqa: E402
from results.store import write_table  # noqa: E402
from service.live_store import ResultsStore  # noqa: E402
from service.synthetic import GPUS, synthetic_frame  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
