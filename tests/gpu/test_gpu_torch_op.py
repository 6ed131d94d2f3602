"""The PyTorch operators on a GPU: the tuned backward against PyTorch's autograd of HF-style
repeat_kv, inside CUDA graph capture, on a side stream, on device 1, under torch.compile; the
race of an untuned shape and its recording; the tuned forward (repkv_forward) bit for bit
against index_select; rope_repkv's fused kernels against the float64 references within their
op's tolerance, eager, under CUDA graph capture and inside torch.compile(fullgraph=True)."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from repkv_tune import launcher as op_launcher  # noqa: E402
from repkv_tune import ops as torch_op  # noqa: E402
from repkv_tune import race as op_race  # noqa: E402
from repkv_tune.ops import reference_backward, reference_forward, repkv, repkv_backward, served  # noqa: E402
from repkv_tune.rope import (  # noqa: E402
    precompute_freqs_cis,
    reference_repkv_rope_backward,
    reference_rope_repkv,
    repkv_rope_backward,
    rope_repkv,
)
from results.schema import COPY_FASTEST  # noqa: E402
from results.store import load_results  # noqa: E402
from tuner.run.gpus import default_label  # noqa: E402
from tuner.runners.race import RACE_MARGIN  # noqa: E402
from variants import DTYPES as VARIANT_DTYPES  # noqa: E402
from variants import Shape, get_op  # noqa: E402

pytestmark = pytest.mark.gpu

# (B, T, NH, NH_KV, HD): the tuned seed shape, nrep 1, NH_KV 1, an untuned odd layout
SHAPES = [(8, 1024, 32, 8, 128), (2, 256, 8, 8, 64), (3, 100, 8, 1, 64), (1, 77, 12, 4, 72)]
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
TOLERANCE = {torch.float32: (1e-5, 1e-5), torch.bfloat16: (2e-2, 1.6e-2), torch.float16: (2e-3, 2e-3)}


def repeat_kv(x: torch.Tensor, nrep: int) -> torch.Tensor:
    B, T, H, D = x.shape
    return x[:, :, :, None, :].expand(B, T, H, nrep, D).reshape(B, T, H * nrep, D)


def replicated(qkv: torch.Tensor, NH: int, NH_KV: int) -> torch.Tensor:
    q, k, v = qkv.split([NH, NH_KV, NH_KV], dim=2)
    return torch.stack([q, repeat_kv(k, NH // NH_KV), repeat_kv(v, NH // NH_KV)], dim=2)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_gradient_matches_autograd_of_repeat_kv(shape, dtype) -> None:
    B, T, NH, NH_KV, HD = shape
    qkv = torch.randn(B, T, NH + 2 * NH_KV, HD, device="cuda", dtype=dtype, requires_grad=True)
    grad = torch.randn(B, T, 3, NH, HD, device="cuda", dtype=dtype)
    mine = repkv(qkv, NH, NH_KV)
    theirs = replicated(qkv, NH, NH_KV)
    assert torch.equal(mine, theirs)
    (got,) = torch.autograd.grad(mine, qkv, grad)
    (expected,) = torch.autograd.grad(theirs, qkv, grad)
    exact = reference_backward(grad.double(), NH_KV)
    atol, rtol = TOLERANCE[dtype]
    torch.testing.assert_close(got.double(), exact, atol=atol, rtol=rtol)
    torch.testing.assert_close(got, expected, atol=atol, rtol=rtol)


def test_every_element_is_written_and_out_is_respected() -> None:
    dout = torch.randn(4, 64, 3, 32, 128, device="cuda", dtype=torch.bfloat16)
    out = torch.full((4, 64, 48, 128), float("nan"), device="cuda", dtype=torch.bfloat16)
    assert repkv_backward(dout, 8, out=out) is out
    assert not out.isnan().any()
    torch.testing.assert_close(out.double(), reference_backward(dout.double(), 8), atol=2e-2, rtol=1.6e-2)


def test_a_view_at_an_odd_offset_is_copied_and_an_odd_out_refused() -> None:
    n = 2 * 16 * 3 * 8 * 64
    flat = torch.randn(n + 1, device="cuda", dtype=torch.bfloat16)
    dout = flat[1:].view(2, 16, 3, 8, 64)  # 2 bytes past a 16-byte boundary
    assert dout.data_ptr() % 16
    expected = reference_backward(dout.double(), 2)
    torch.testing.assert_close(repkv_backward(dout, 2).double(), expected, atol=2e-2, rtol=1.6e-2)
    out = torch.empty(2 * 16 * 12 * 64 + 1, device="cuda", dtype=torch.bfloat16)[1:].view(2, 16, 12, 64)
    with pytest.raises(ValueError, match="16-byte boundary"):
        repkv_backward(dout, 2, out=out)
    with pytest.raises(ValueError, match="16-byte boundary"):
        torch.ops.repkv_tune.repkv_backward_out(dout, 2, out)


def test_a_tuned_shape_is_served_exactly() -> None:
    key, how, race = served((8, 1024, 32, 8, 128), torch.bfloat16)
    assert how == "exact" and not race, key


def test_an_untuned_shape_races_its_shortlist_and_keeps_the_fastest() -> None:
    key, how, race = served((3, 1000, 32, 8, 128), torch.bfloat16)
    assert how == "raced" and len(race) >= 2
    # the earliest candidate within RACE_MARGIN of the fastest median (tuner.runners.race)
    fastest = min(median for _, median in race)
    assert key == next(k for k, median in race if median <= fastest * (1 + RACE_MARGIN))


def test_graph_capture_and_replay() -> None:
    dout = torch.randn(2, 512, 3, 32, 128, device="cuda", dtype=torch.bfloat16)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        repkv_backward(dout, 8)  # compile and pack before capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        dinp = repkv_backward(dout, 8)
    for _ in range(3):
        dout.copy_(torch.randn_like(dout))
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(
            dinp.double(), reference_backward(dout.double(), 8), atol=2e-2, rtol=1.6e-2
        )


def test_a_side_stream_orders_after_its_own_work() -> None:
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        dout = torch.randn(8, 1024, 3, 32, 128, device="cuda", dtype=torch.float32)
        torch.cuda._sleep(50_000_000)  # the default stream would run ahead of this
        dout.mul_(2.0)
        dinp = repkv_backward(dout, 8)
    side.synchronize()
    torch.testing.assert_close(dinp.double(), reference_backward(dout.double(), 8), atol=1e-5, rtol=1e-5)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="one GPU")
def test_device_1() -> None:
    dout = torch.randn(2, 128, 3, 32, 128, device="cuda:1", dtype=torch.bfloat16)
    dinp = repkv_backward(dout, 8)
    assert dinp.device == dout.device
    torch.cuda.synchronize(1)
    torch.testing.assert_close(dinp.double(), reference_backward(dout.double(), 8), atol=2e-2, rtol=1.6e-2)


def test_torch_compile_fullgraph() -> None:
    def step(qkv: torch.Tensor) -> torch.Tensor:
        q, k, v = repkv(qkv, 32, 8).unbind(2)
        return (q.float() * k.float() + v.float()).sum()

    qkv = torch.randn(2, 128, 48, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    twin = qkv.detach().clone().requires_grad_(True)
    torch._dynamo.reset()
    compiled = torch.compile(step, fullgraph=True, dynamic=False)
    compiled(qkv).backward()
    step(twin).backward()
    torch.testing.assert_close(qkv.grad, twin.grad)


UNTUNED = (3, 1000, 32, 8, 128)  # no bundled result has this B*T: its first call races


@pytest.fixture
def recording(monkeypatch, tmp_path: Path) -> Path:
    """Races record under tmp_path/rows for this test only; launchers chosen afresh from the
    bundled results alone (an empty user directory), so the untuned shape races again."""
    monkeypatch.setattr(op_race, "_RECORD", None)
    monkeypatch.setattr(op_launcher, "LAUNCHERS", op_launcher.Launchers(tmp_path / "no-user-results"))
    monkeypatch.setattr(torch_op, "_PLANS", {})
    torch_op.record_races(directory=tmp_path / "rows")
    return tmp_path / "rows"


def test_a_recorded_race_writes_the_measurements_as_rows_of_its_own_run(recording: Path) -> None:
    key, how, race = served(UNTUNED, torch.bfloat16)
    assert how == "raced" and len(race) >= 2
    frame, report = load_results(recording)
    assert not report.dropped and not report.skipped
    gpu = default_label(torch.cuda.get_device_name(0))
    ok = frame[frame["status"] == "ok"]
    assert sorted(ok["config_key"]) == sorted(k for k, _ in race)
    assert set(frame["gpu"]) == {gpu} and set(frame["dtype"]) == {"bf16"}
    assert frame["run_id"].str.startswith(f"race-{gpu}-").all() and frame["run_id"].nunique() == 1
    assert set(map(tuple, frame[["B", "T", "NH", "NH_KV", "HD"]].to_numpy().tolist())) == {UNTUNED}
    assert (ok["copy_ms"] > 0).all() and (ok["ratio_to_copy"] > 0).all()
    assert (ok["reps"] == op_race.RACE_REPS * op_race.RACE_ROUNDS).all()
    assert (frame["hold_us"] == op_race.RACE_HOLD_US).all()  # timed as the tuner times: ranked with its rows
    assert (frame["copy_method"] == COPY_FASTEST).all()  # and held to the tuner's copy
    medians = dict(zip(ok["config_key"], ok["time_ms"], strict=True))
    assert medians[key] <= min(medians.values()) * (1 + RACE_MARGIN) + 1e-12
    assert dict(race) == pytest.approx(medians)


def test_a_recorded_shape_is_served_exactly_by_the_next_process(recording: Path) -> None:
    _, how, race = served(UNTUNED, torch.bfloat16)
    assert how == "raced"
    fresh = op_launcher.Launchers(recording)
    launcher = fresh.get((UNTUNED, "bf16", 0))
    # the index serves the fastest recorded median (the race's margin no longer applies)
    fastest = min(race, key=lambda entry: entry[1])[0]
    assert (launcher.served_from, launcher.race, launcher.config_key) == ("exact", (), fastest)


def untuned_dout(dtype: torch.dtype) -> torch.Tensor:
    B, T, NH, _, HD = UNTUNED
    return torch.randn(B, T, 3, NH, HD, device="cuda", dtype=dtype)


def assert_backward(dinp: torch.Tensor, dout: torch.Tensor) -> None:
    torch.cuda.synchronize()
    atol, rtol = TOLERANCE[dout.dtype]
    torch.testing.assert_close(
        dinp.double(), reference_backward(dout.double(), UNTUNED[3]), atol=atol, rtol=rtol
    )


def test_recording_through_the_environment(monkeypatch, recording: Path, tmp_path: Path) -> None:
    monkeypatch.setattr(op_race, "_RECORD", None)
    monkeypatch.setenv("REPKV_RECORD", "1")
    monkeypatch.setenv("REPKV_RESULTS_DIR", str(tmp_path / "user"))
    dout = untuned_dout(torch.float16)
    assert_backward(repkv_backward(dout, UNTUNED[3]), dout)
    frame, _ = load_results(tmp_path / "user")
    assert len(frame) >= 2 and set(frame["dtype"]) == {"fp16"}


def test_a_recording_that_cannot_be_written_leaves_the_call_working(recording: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    torch_op.record_races(directory=blocker / "rows")
    dout = untuned_dout(torch.float32)
    assert_backward(repkv_backward(dout, UNTUNED[3]), dout)
    assert served(UNTUNED, torch.float32)[1] == "raced"


def test_the_op_serves_shapes_tuned_fed_their_fed_winner_unless_repkv_l2_is_cold(tmp_path: Path) -> None:
    """REPKV_L2 is read at import: a fresh interpreter for each setting."""
    import os
    import subprocess
    import sys

    from results.index import build_index
    from results.store import bundled_results_dir, load_results

    index = build_index(load_results(bundled_results_dir())[0])
    small, large = ("h200", (1, 512, 32, 8, 64), "bf16"), ("h200", (8, 1024, 32, 8, 128), "bf16")
    fed_key = index.in_state("fed").groups[small].best.config_key
    cold_key, large_key = index.groups[small].best.config_key, index.groups[large].best.config_key
    assert fed_key != cold_key
    code = (
        "import torch\n"
        "from repkv_tune.ops import repkv_backward, served\n"
        "for B, T, HD in ((1, 512, 64), (8, 1024, 128)):\n"
        "    dout = torch.randn(B, T, 3, 32, HD, device='cuda', dtype=torch.bfloat16)\n"
        "    repkv_backward(dout, 8)\n"
        "    print(served((B, T, 32, 8, HD), torch.bfloat16)[:2])\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "REPKV_L2"} | {"REPKV_RESULTS_DIR": str(tmp_path)}

    def run(**changed: str) -> subprocess.CompletedProcess:
        command = [sys.executable, "-c", code]
        return subprocess.run(command, capture_output=True, text=True, env=env | changed, timeout=300)

    for changed, first in (({}, fed_key), ({"REPKV_L2": "fed"}, fed_key), ({"REPKV_L2": "cold"}, cold_key)):
        result = run(**changed)  # fed by default, as in a training step
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines() == [str((first, "exact")), str((large_key, "exact"))], changed
    bad = run(REPKV_L2="warm")
    assert bad.returncode != 0 and "unknown L2 state 'warm'" in bad.stderr


# --- the tuned forward, and RoPE fused in ---------------------------------------------------
NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}
# (B, T, NH, NH_KV, HD): the seed layout, MQA, HD 72, nrep 3 with HD 6 (a narrow word)
ROPE_SHAPES = [(8, 1024, 32, 8, 128), (3, 100, 8, 1, 64), (1, 77, 12, 4, 72), (2, 33, 9, 3, 6)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [*SHAPES, (2, 33, 9, 3, 6), (1, 5, 4, 2, 3)], ids=str)
def test_the_forward_is_the_tuned_kernel_and_equals_index_select_bit_for_bit(shape, dtype) -> None:
    B, T, NH, NH_KV, HD = shape
    qkv = torch.randn(B, T, NH + 2 * NH_KV, HD, device="cuda", dtype=dtype)
    out = repkv(qkv, NH, NH_KV)
    assert torch.equal(out, reference_forward(qkv, NH, NH_KV))
    launched = ("repkv_forward", shape, NAMES[dtype], 0) in op_launcher.LAUNCHERS._by_key
    assert launched == (NH != NH_KV)  # NH == NH_KV: a plain device copy
    flat = torch.randn(qkv.numel() + 1, device="cuda", dtype=dtype)
    odd = flat[1:].view(qkv.shape)  # not on a 16-byte boundary: copied first
    assert torch.equal(repkv(odd, NH, NH_KV), reference_forward(odd, NH, NH_KV))
    strided = torch.randn(B, T, NH + 2 * NH_KV, HD + 2, device="cuda", dtype=dtype)[..., :HD]
    assert torch.equal(repkv(strided, NH, NH_KV), reference_forward(strided, NH, NH_KV))


def assert_within_op_tolerance(
    op_name: str, got: torch.Tensor, expected: torch.Tensor, x: torch.Tensor
) -> None:
    shape = Shape(got.shape[0], got.shape[1], *_heads(op_name, got, x))
    atol, rtol = get_op(op_name).tolerance(VARIANT_DTYPES[NAMES[got.dtype]], shape, float(x.abs().max()))
    torch.testing.assert_close(got.double(), expected, atol=atol, rtol=rtol)


def _heads(op_name: str, got: torch.Tensor, x: torch.Tensor) -> tuple[int, int, int]:
    """(NH, NH_KV, HD) from the forward's out (B, T, 3, NH, HD) and qkv, or the backward's
    dinp (B, T, NH + 2*NH_KV, HD) and dout (B, T, 3, NH, HD)."""
    if op_name == "rope_repkv_forward":
        NH, HD = got.shape[3], got.shape[4]
        return NH, (x.shape[2] - NH) // 2, HD
    NH, HD = x.shape[3], x.shape[4]
    return NH, (got.shape[2] - NH) // 2, HD


def rope_inputs(shape, dtype):
    B, T, NH, NH_KV, HD = shape
    qkv = torch.randn(B, T, NH + 2 * NH_KV, HD, device="cuda", dtype=dtype)
    return qkv, precompute_freqs_cis(HD, T, dtype=dtype, device="cuda")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", ROPE_SHAPES, ids=str)
def test_rope_repkv_forward_and_backward_meet_the_ops_tolerance(shape, dtype) -> None:
    B, T, NH, NH_KV, HD = shape
    qkv, freqs = rope_inputs(shape, dtype)
    qkv.requires_grad_(True)
    out = rope_repkv(qkv, freqs, NH, NH_KV)
    assert out.shape == (B, T, 3, NH, HD) and out.dtype == dtype
    expected = reference_rope_repkv(qkv.detach().double(), freqs.double(), NH, NH_KV)
    assert_within_op_tolerance("rope_repkv_forward", out.detach(), expected, qkv.detach())
    grad = torch.randn_like(out)
    (dinp,) = torch.autograd.grad(out, qkv, grad)
    expected = reference_repkv_rope_backward(grad.double(), freqs.double(), NH_KV)
    assert_within_op_tolerance("repkv_rope_backward", dinp, expected, grad)
    for op_name in ("rope_repkv_forward", "repkv_rope_backward"):
        key, how, race = served(shape, dtype, op=op_name)
        assert how in ("exact", "nearest", "generic") and not race, (op_name, key)


def test_rope_repkv_under_cuda_graph_capture_and_replay() -> None:
    shape = (2, 512, 32, 8, 128)
    B, T, NH, NH_KV, HD = shape
    qkv, freqs = rope_inputs(shape, torch.bfloat16)
    dout = torch.randn(B, T, 3, NH, HD, device="cuda", dtype=torch.bfloat16)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # compile and pack before capture
        rope_repkv(qkv, freqs, NH, NH_KV)
        repkv_rope_backward(dout, freqs, NH_KV)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = rope_repkv(qkv, freqs, NH, NH_KV)
        dinp = repkv_rope_backward(dout, freqs, NH_KV)
    for _ in range(3):
        qkv.copy_(torch.randn_like(qkv))
        dout.copy_(torch.randn_like(dout))
        graph.replay()
        torch.cuda.synchronize()
        expected = reference_rope_repkv(qkv.double(), freqs.double(), NH, NH_KV)
        assert_within_op_tolerance("rope_repkv_forward", out, expected, qkv)
        expected = reference_repkv_rope_backward(dout.double(), freqs.double(), NH_KV)
        assert_within_op_tolerance("repkv_rope_backward", dinp, expected, dout)


def test_rope_repkv_inside_torch_compile_fullgraph() -> None:
    shape = (2, 128, 32, 8, 128)
    B, T, NH, NH_KV, HD = shape
    qkv, freqs = rope_inputs(shape, torch.bfloat16)
    qkv.requires_grad_(True)
    weights = torch.randn(B, T, 3, NH, HD, device="cuda", dtype=torch.float32)

    def step(x: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
        return (rope_repkv(x, f, NH, NH_KV).float() * weights).sum()

    twin = qkv.detach().clone().requires_grad_(True)
    torch._dynamo.reset()
    compiled = torch.compile(step, fullgraph=True, dynamic=False)
    compiled(qkv, freqs).backward()
    step(twin, freqs).backward()
    torch.testing.assert_close(qkv.grad, twin.grad)
    dout = weights.bfloat16()  # the gradient that reaches the fused backward
    expected = reference_repkv_rope_backward(dout.double(), freqs.double(), NH_KV)
    assert_within_op_tolerance("repkv_rope_backward", qkv.grad, expected, dout)
