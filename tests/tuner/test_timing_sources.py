"""tuner.runners.timing_sources: the harness's CUDA sources compile offline, and the copy kernel's
geometry covers every byte exactly once (no GPU)."""

from __future__ import annotations

import numpy as np
import pytest

from tuner.runners.timing_sources import COPY_BLOCK, COPY_KERNEL_SOURCE, HOLD_SOURCE, copy_geometry


@pytest.mark.parametrize(("source", "name"), [(HOLD_SOURCE, "hold_ns"), (COPY_KERNEL_SOURCE, "copy_words")])
def test_each_source_compiles_for_sm_90(source: str, name: str) -> None:
    nvrtc = pytest.importorskip("cuda.bindings.nvrtc")
    err, program = nvrtc.nvrtcCreateProgram(source.encode(), f"{name}.cu".encode(), 0, [], [])
    assert err == nvrtc.nvrtcResult.NVRTC_SUCCESS
    options = [b"-arch=sm_90"]
    (result,) = nvrtc.nvrtcCompileProgram(program, len(options), options)
    err, size = nvrtc.nvrtcGetProgramLogSize(program)
    log = b" " * size
    nvrtc.nvrtcGetProgramLog(program, log)
    nvrtc.nvrtcDestroyProgram(program)
    assert result == nvrtc.nvrtcResult.NVRTC_SUCCESS, log.decode(errors="replace")


def emulate_copy(src: np.ndarray) -> np.ndarray:
    """copy_words as the GPU runs it: thread i of the grid copies word i and tail byte i."""
    nbytes = src.size
    words, tail, grid = copy_geometry(nbytes)
    dst = np.zeros_like(src)
    threads = np.arange(grid * COPY_BLOCK)
    body = threads[threads < words]
    dst_words = dst[: 16 * words].view(np.uint32).reshape(-1, 4)
    dst_words[body] = src[: 16 * words].view(np.uint32).reshape(-1, 4)[body]
    ends = threads[threads < tail]
    dst[16 * words + ends] = src[16 * words + ends]
    return dst


@pytest.mark.parametrize("nbytes", [1, 15, 16, 17, 4095, 4096, 4096 * 256 + 7, 5_644_800, 42_240_003])
def test_the_copy_kernel_copies_every_byte(nbytes: int) -> None:
    src = np.random.default_rng(nbytes).integers(1, 255, size=nbytes, dtype=np.uint8)
    assert np.array_equal(emulate_copy(src), src)
    words, tail, grid = copy_geometry(nbytes)
    assert 16 * words + tail == nbytes and grid * COPY_BLOCK >= max(words, tail)
    assert (grid - 1) * COPY_BLOCK < max(words, tail, 1)  # no block with nothing to do
