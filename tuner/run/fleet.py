"""`python -m tuner --devices all` (or `--devices 0,1`): every GPU of the host on one study.

One measuring process per GPU: the command starts a `python -m tuner tune` child per device,
each with its own GpuRunner on its own GPU (CUDA_VISIBLE_DEVICES names that one GPU alone, so
no child ever makes a context on another's), all sharing the studies through one storage
that several processes can use: the journal file in the results directory by default, or
the PostgreSQL database given with --storage (SQLite and memory are refused). A child files
its rows under its own GPU's label, so GPUs of different models on one host are studied
separately, each model in its own study per shape and dtype.

Children run in their own sessions: the parent relays each Ctrl-C to them itself (once for
"stop after this trial", twice for "quit now"), prefixes their output with their device, and
exits with 130 when interrupted, else with the worst exit status of its children. A child
stops by itself when its parent dies (it watches its parent's pid).

With --replay, `--devices 0,1,2,3` starts that many replay workers (the device index is only
a name there): how the fleet is tested without a GPU.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tuner.interrupt import EXIT_INTERRUPTED, StopFlag, sigint_stops
from tuner.run.gpus import default_label
from variants.errors import RepkvTuneError

PARENT_ENV = "REPKV_FLEET_PARENT"  # a child's parent pid: the child stops when it changes
DEVICE_ENV = "REPKV_FLEET_DEVICE"  # the device a child measures on, as the parent numbers it


class FleetError(RepkvTuneError, ValueError):
    """A --devices request that cannot run: the message says what to do."""


@dataclass(frozen=True)
class Device:
    index: int  # as CUDA numbers it in this process (after CUDA_VISIBLE_DEVICES)
    name: str  # "NVIDIA H200", or "replay"

    @property
    def label(self) -> str:
        return default_label(self.name) if self.name != "replay" else "replay"


def cuda_devices(asked: str = "all") -> list[Device]:
    """The GPUs CUDA shows this process (CuPy, imported here only). Without CuPy, or a driver
    that serves it, or any GPU, a FleetError that says which (`tuner.run.preflight.check_cuda`)."""
    from tuner.run.preflight import PreflightError, check_cuda

    try:
        check_cuda()
    except PreflightError as exc:
        raise FleetError(f"--devices {asked}: {exc}") from None
    import cupy

    count = cupy.cuda.runtime.getDeviceCount()
    devices = []
    for i in range(count):
        name = cupy.cuda.runtime.getDeviceProperties(i)["name"]
        devices.append(Device(i, name.decode() if isinstance(name, bytes) else str(name)))
    return devices


def parse_devices(text: str, *, replay: bool) -> list[Device]:
    """'all' (a GPU host) or a comma list of indices ('0,1'; with --replay, any indices)."""
    text = text.strip()
    if text == "all":
        if replay:
            raise FleetError("with --replay, name the workers: --devices 0,1,2,3 (one replay worker each)")
        return cuda_devices(text)
    try:
        indices = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise FleetError(f"--devices takes 'all' or indices such as 0,1 (got {text!r})") from None
    if not indices or min(indices) < 0:
        raise FleetError(f"--devices takes 'all' or indices such as 0,1 (got {text!r})")
    if len(set(indices)) != len(indices):
        raise FleetError(f"--devices {text}: a GPU appears twice (one measuring process per GPU)")
    if replay:
        return [Device(i, "replay") for i in indices]
    known = {d.index: d for d in cuda_devices(text)}
    missing = [i for i in indices if i not in known]
    if missing:
        raise FleetError(f"no GPU {missing[0]} here: CUDA shows {', '.join(map(str, known)) or 'none'}")
    return [known[i] for i in indices]


def check_labels(devices: list[Device], gpu: str | None) -> None:
    """--gpu names one model: refused when the devices are of several."""
    labels = sorted({d.label for d in devices})
    if gpu is not None and len(labels) > 1:
        groups = "; ".join(
            f"{label}: {','.join(str(d.index) for d in devices if d.label == label)}" for label in labels
        )
        raise FleetError(
            f"--gpu {gpu} names one model, but these GPUs are of several ({groups}): "
            "drop --gpu (each is filed under its own label)"
        )


def shared_storage(storage: str | None, results: Path | None) -> str:
    """The storage every child uses: the one given (journal or PostgreSQL), else the journal
    file in the results directory."""
    if storage is None:
        if results is None:
            raise FleetError(
                "--devices with --replay needs --results DIR (or --storage): the workers share a study"
            )
        return f"journal:{Path(results).resolve() / 'optuna.journal'}"
    if storage.startswith("sqlite") or storage in ("memory", ":memory:"):
        raise FleetError(
            f"--devices runs a process per GPU and {storage.split(':')[0]} storage serves one process: "
            "use --storage journal:FILE (one host; the default) or postgresql://... (several hosts)"
        )
    return storage


def child_argv(
    argv: Sequence[str], device: Device, seed: int | None, storage: str, replay: bool
) -> list[str]:
    """The parent's command line for one child: without --devices, --seed and --storage,
    with the child's own device, seed and the shared storage, and no progress bars."""
    drop_with_value = {"--devices", "--seed", "--storage", "--device"}
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in drop_with_value:
            skip = "=" not in arg
            continue
        if arg in ("tune", "--no-progress"):
            continue
        out.append(arg)
    out = ["tune", *out, "--storage", storage, "--no-progress"]
    out += ["--device", str(device.index) if replay else "0"]
    if seed is not None:
        out += ["--seed", str(seed + device.index)]
    return out


def visible_device(index: int) -> str:
    """What CUDA_VISIBLE_DEVICES names device `index` of this process as."""
    current = os.environ.get("CUDA_VISIBLE_DEVICES")
    if current:
        parts = [p.strip() for p in current.split(",") if p.strip()]
        if index < len(parts):
            return parts[index]
    return str(index)


def _pump(stream, prefix: str) -> None:
    for line in iter(stream.readline, ""):
        sys.stderr.write(f"{prefix}{line}" if line.strip() else line)
        sys.stderr.flush()
    stream.close()


def run_fleet(
    argv: Sequence[str],
    devices_text: str,
    *,
    replay: bool,
    gpu: str | None,
    seed: int | None,
    storage: str | None,
    results: Path | None,
) -> int:
    """Start one child per device, relay Ctrl-C, wait for them; returns the exit status."""
    devices = parse_devices(devices_text, replay=replay)
    check_labels(devices, gpu)
    shared = shared_storage(storage, results)
    labels = sorted({d.label for d in devices})
    print(
        f"fleet: {len(devices)} workers ({', '.join(f'{d.index}: {d.name}' for d in devices)}) "
        f"on {shared}" + (f"; {len(labels)} models, studied separately" if len(labels) > 1 else ""),
        file=sys.stderr,
    )
    children: list[tuple[Device, subprocess.Popen]] = []
    pumps = []
    for device in devices:
        env = {**os.environ, PARENT_ENV: str(os.getpid()), DEVICE_ENV: str(device.index)}
        if not replay:
            env["CUDA_VISIBLE_DEVICES"] = visible_device(device.index)
        proc = subprocess.Popen(
            [sys.executable, "-m", "tuner", *child_argv(argv, device, seed, shared, replay)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            start_new_session=True,  # the terminal's Ctrl-C reaches the parent only; it relays it
        )
        children.append((device, proc))
        pump = threading.Thread(
            target=_pump, args=(proc.stdout, f"[{device.label}:{device.index}] "), daemon=True
        )
        pump.start()
        pumps.append(pump)

    def relay(signum: int) -> None:
        for _, proc in children:
            if proc.poll() is None:
                with contextlib.suppress(OSError):
                    proc.send_signal(signum)

    def abort() -> None:
        relay(signal.SIGTERM)  # a child's second Ctrl-C: it kills its GPU worker and exits
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and any(p.poll() is None for _, p in children):
            time.sleep(0.05)
        relay(signal.SIGKILL)

    stop = StopFlag()
    with sigint_stops(
        stop,
        # SIGTERM, which a child takes for a Ctrl-C even where it started with SIGINT ignored
        # (a script's `tuner --devices ... &`: the children inherit that)
        on_first=lambda: relay(signal.SIGTERM),
        on_abort=abort,
        message="stopping every worker after its current trial (Ctrl-C again to quit at once)",
    ):
        while any(proc.poll() is None for _, proc in children):
            time.sleep(0.1)
    for pump in pumps:
        pump.join(timeout=5)
    codes = {device.index: proc.returncode for device, proc in children}
    failed = {i: c for i, c in codes.items() if c not in (0, EXIT_INTERRUPTED)}
    print(
        "fleet: exit status per device: " + ", ".join(f"{i}: {c}" for i, c in codes.items()),
        file=sys.stderr,
    )
    if stop or any(c == EXIT_INTERRUPTED for c in codes.values()):
        return EXIT_INTERRUPTED
    return max(failed.values(), default=0, key=abs) if failed else 0


def in_fleet() -> bool:
    """Whether this process is a child of `--devices`."""
    return bool(os.environ.get(PARENT_ENV))


def watch_parent(stop: StopFlag) -> None:
    """In a child: set `stop` when the parent that started it is gone."""
    expected = os.environ.get(PARENT_ENV)
    if not expected:
        return

    def watch() -> None:  # a thread: it only sets the flag
        while not stop:
            if str(os.getppid()) != expected:
                stop.set("the fleet's parent process is gone")
                return
            time.sleep(1.0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()
