"""The fakes the peers benchmark's loop tests share (test_bench_loop_*.py): a session, a device, a plan."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from tuner import peers as pb
from tuner.runners.runner import Measurement
from variants import DTYPES, FAMILIES, Config, Shape
from variants.reference import decode, encode, nan_bits, random_input, reference, validate_output

torch = pytest.importorskip("torch")
torch_peers = pytest.importorskip("tuner.runners.gpu.torch_peers")

REPO = Path(__file__).resolve().parents[2]
SHAPE = Shape(2, 3, 8, 2, 16)


@pytest.fixture(scope="module", name="script")  # the test modules import it as script_fixture
def script_fixture():
    """What the loop is made of, from the parts of scripts/bench_kernels.py."""
    sys.path.insert(0, str(REPO / "scripts"))
    from bench_kernels_parts.device import Device
    from bench_kernels_parts.loop import PeerBench
    from bench_kernels_parts.preparation import prepare_kernels, tuned_choices
    from bench_kernels_parts.report import report

    return SimpleNamespace(
        Device=Device,
        PeerBench=PeerBench,
        prepare_kernels=prepare_kernels,
        report=report,
        tuned_choices=tuned_choices,
    )


class FakeSession:
    """DeviceSession's interface over numpy arrays; `measure` answers without running anything."""

    families = FAMILIES

    def __init__(self) -> None:
        self.flush = lambda: None
        self._buffers = None
        self.timing_flush = lambda: self.flush
        self.measured = []
        self.releases = 0

    def buffers(self, shape, dtype):
        key = (shape, dtype.name)
        if self._buffers is None or self._buffers[0] != key:
            dout = np.empty(shape.dout_numel, dtype=dtype.storage)
            dinp = np.empty(shape.dinp_numel, dtype=dtype.storage)
            self._buffers = (key, dout, dinp)
        return self._buffers[1], self._buffers[2]

    def release(self) -> None:
        self._buffers = None
        self.releases += 1

    def run_checked(self, shape, dtype, launch):
        dout, dinp = self.buffers(shape, dtype)
        dout[...] = random_input(shape, dtype, np)
        dinp.view(np.uint32 if dtype.itemsize == 4 else np.uint16).fill(nan_bits(dtype))
        launch()
        return validate_output(dinp, dout, shape, dtype, np)

    def launcher(self, shape, dtype, config):
        """A launch that writes the reference (or, with block 1024, nothing): what a kernel does."""
        dout, dinp = self.buffers(shape, dtype)

        def launch():
            if config.values.get("block") != 1024:
                dinp[...] = encode(reference(decode(dout, dtype), shape).ravel(), dtype)

        return launch

    def measure(self, shape, dtype, config):
        self.measured.append((shape, dtype.name, config.key))
        block = config.values.get("block", 0)
        if block == 1024:
            return Measurement.failed("launch_error", "too many resources requested")
        return Measurement("ok", time_ms=0.05 + block / 1e4, p20_ms=0.05, p80_ms=0.06, reps=100)


def to_torch(array, dtype):
    if dtype.name == "bf16":
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)


def to_storage(tensor, dtype):
    if dtype.name == "bf16":
        return tensor.contiguous().view(torch.int16).numpy().view(np.uint16).ravel()
    return tensor.contiguous().numpy().ravel()


def fake_device(script, session=None):
    counter = itertools.count(1)
    calls = []

    def time_calls(launch, flush, reps):
        for _ in range(3):
            flush()
            launch()
        calls.append(reps)
        t = 0.01 + 0.001 * next(counter)
        return SimpleNamespace(median_ms=t, p20_ms=t * 0.9, p80_ms=t * 1.1, reps=reps)

    def time_copy(nbytes, flush, reps):
        t = SimpleNamespace(median_ms=0.01 + nbytes * 1e-12, p20_ms=0.009, p80_ms=0.011, reps=reps)
        return "kernel", t

    device = script.Device(
        session=session or FakeSession(),
        xp=np,
        time_calls=time_calls,
        time_copy=time_copy,
        empty_launch=lambda: None,
        to_torch=to_torch,
        to_storage=to_storage,
        torch_device="cpu",
        name="Fake CPU",
        label="fake",
        meta={"gpu": "Fake CPU", "gpu_label": "fake"},
    )
    device.calls = calls
    return device


def plan(**changes) -> pb.Plan:
    values = {
        "shapes": [SHAPE],
        "dtypes": [DTYPES["fp32"]],
        "groups": ["llmc", "eager", "compile"],
        "eager": torch_peers.EAGER,
        "compiled": torch_peers.COMPILED,
        "max_autotune": (),
        "triton_configs": 5,
        "reps": 100,
        "budget_s": 0.0,
    }
    values.update(changes)
    return pb.Plan(**values)


def bench_of(script, plan_, device=None, **kwargs):
    return script.PeerBench(
        plan_, device or fake_device(script), start=0.0, compile_backend="aot_eager", **kwargs
    )


def tuned_choice(dtype):
    """What the selection would serve SHAPE: llm.c's kernel at block 256 (the fake session
    measures it at 0.05 + 256/1e4 ms)."""
    config = Config.of("naive", block=256)
    group = SimpleNamespace(shape=SHAPE, dtype=dtype)
    return {
        (SHAPE, dtype.name): SimpleNamespace(
            group=group, candidate=SimpleNamespace(config=config), match="exact"
        )
    }
