"""One measuring process per GPU: the GPU runner's lock (no GPU needed to test it)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import tuner_fakes as F

from tuner.runners.gpu.runner import GpuBusy, GpuLock, gpu_lock_path

ROOT = Path(__file__).resolve().parents[2]


def _other_process_takes(path: Path) -> subprocess.CompletedProcess:
    code = "from pathlib import Path; from tuner.runners.gpu.runner import GpuLock; "
    code += f"GpuLock(Path({str(path)!r})).acquire()"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)


def test_a_second_process_is_refused_the_gpu_until_the_first_lets_go(tmp_path: Path) -> None:
    path = tmp_path / "gpu.lock"
    first, again = GpuLock(path), GpuLock(path)
    first.acquire()
    again.acquire()  # another runner of the same process: counted, not refused
    refused = _other_process_takes(path)
    assert refused.returncode != 0 and "GpuBusy" in refused.stderr and f"pid {os.getpid()}" in refused.stderr
    first.release()
    assert _other_process_takes(path).returncode != 0  # still held by `again`
    again.release()
    assert _other_process_takes(path).returncode == 0
    fd = os.open(path, os.O_RDWR)  # another holder, as a second process would be
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        with pytest.raises(GpuBusy, match="one measuring process per GPU"):
            GpuLock(path).acquire()
    finally:
        os.close(fd)


def test_the_lock_is_named_after_the_host_and_the_gpu() -> None:
    identity = replace(F.IDENTITY, pci_bus_id="0000:3B:00.0")
    assert gpu_lock_path(identity, 0).name == "repkv-tune-gpu-testhost-0000-3B-00.0.lock"
    assert "dev1" in gpu_lock_path(F.IDENTITY, 1).name  # no bus id known: the device index
