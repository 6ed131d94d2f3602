"""scripts/bench_hbm_floor.py: the traffic it models, the twin's index math and the table (no GPU)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from bench_hbm_floor import STREAM_SOURCE, summary, traffic, twin_fraction, twin_targets  # noqa: E402

from variants import Shape, get_dtype  # noqa: E402


def test_traffic_is_all_of_dout_read_and_all_of_dinp_written() -> None:
    shape = Shape(B=2, T=3, NH=32, NH_KV=8, HD=128)
    read, write = traffic(shape, get_dtype("bf16"))
    assert read == 2 * 3 * 3 * 32 * 128 * 2
    assert write == 2 * 3 * (32 + 2 * 8) * 128 * 2
    assert read + write == shape.bytes_moved(get_dtype("bf16"))


@pytest.mark.parametrize("read_words,write_words", [(96, 48), (48, 32), (192, 80), (7, 3), (5, 5), (1000, 1)])
def test_the_twin_stores_every_output_word_once_in_order(read_words: int, write_words: int) -> None:
    stored = [o for o in twin_targets(read_words, write_words) if o >= 0]
    assert stored == list(range(write_words))


def test_the_twin_step_holds_on_large_buffers() -> None:
    # 2.4 GB of 16-byte words: the kernel's unsigned 64-bit products must not overflow
    read_words, write_words = 100_663_296, 50_331_648 - 7
    f = twin_fraction(read_words, write_words)
    assert (read_words * f) >> 32 == write_words
    assert ((read_words - 1) * f) >> 32 == write_words - 1
    assert read_words * f < 2**64


def test_every_streaming_kernel_compiles_offline() -> None:
    from bench_hbm_floor import KERNELS, PER_THREAD
    from cuda.bindings import nvrtc

    err, program = nvrtc.nvrtcCreateProgram(STREAM_SOURCE.encode(), b"hbm.cu", 0, [], [])
    names = [f"hbm_{kind}<{per}>" for kind in KERNELS for per in PER_THREAD]
    for name in names:
        nvrtc.nvrtcAddNameExpression(program, name.encode())
    options = [b"-std=c++17", b"-arch=sm_90"]
    (result,) = nvrtc.nvrtcCompileProgram(program, len(options), options)
    assert result == nvrtc.nvrtcResult.NVRTC_SUCCESS
    for name in names:
        err, lowered = nvrtc.nvrtcGetLoweredName(program, name.encode())
        assert err == nvrtc.nvrtcResult.NVRTC_SUCCESS and lowered
    nvrtc.nvrtcDestroyProgram(program)


def probe_rows() -> pd.DataFrame:
    times = {"memcpy": 1.00, "tuned": 0.97, "read": 0.60, "write": 0.35, "copy": 1.01, "twin": 0.98}
    base = {"shape": "B=8,T=1024,NH=32,NH_KV=8,HD=128", "dtype": "bf16", "MB": 302.0}
    return pd.DataFrame(
        [base | {"side": side, "time_ms": t, "device_us": 1000 * t - 2} for side, t in times.items()]
    )


def test_summary_gives_each_side_over_the_memcpy_and_tuned_over_the_twin() -> None:
    row = summary(probe_rows()).iloc[0]
    assert row["tuned"] == pytest.approx(0.97)
    assert row["read+write"] == pytest.approx(0.95)
    assert row["twin"] == pytest.approx(0.98)
    assert row["tuned/twin"] == pytest.approx(0.97 / 0.98)
    assert row["dev tuned"] == pytest.approx(968 / 998)
    assert row["tuned/fastest copy"] == pytest.approx(0.97)  # the memcpy was the faster copy
    assert row["dev tuned/fastest copy"] == pytest.approx(968 / 998)


def test_render_prints_the_table_from_a_parquet(tmp_path: Path) -> None:
    probe_rows().to_parquet(tmp_path / "hbm.parquet", index=False)
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "bench_hbm_floor.py"),
            "--render",
            str(tmp_path / "hbm.parquet"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    # rows of a run from before --op: repkv backward's
    row = (
        "| repkv_backward | B=8,T=1024,NH=32,NH_KV=8,HD=128 | bf16 | 302.0 | 1.010 | 0.950 | 0.980 | 0.970 |"
    )
    assert row in done.stdout


@pytest.mark.parametrize(
    "script", ["bench_hbm_floor.py", "probes/probe_launch.py", "probes/probe_inductor.py"]
)
def test_the_gpu_scripts_explain_themselves_without_a_gpu(script: str) -> None:
    command = [sys.executable, str(ROOT / "scripts" / script), "--help"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "--shape" in done.stdout and "--out" in done.stdout
