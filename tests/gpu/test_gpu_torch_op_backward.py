"""The tuned backward on a GPU: against autograd of repeat_kv, served or raced, graphs, streams, compile."""

from __future__ import annotations

from pathlib import Path

import pytest
from torch_op_helpers import DTYPES, SHAPES, TOLERANCE, bundled_rows_gpu

torch = pytest.importorskip("torch")

from repkv_tune.ops import reference_backward, repkv, repkv_backward, served  # noqa: E402
from tuner.runners.race import RACE_MARGIN  # noqa: E402

pytestmark = pytest.mark.gpu


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


def test_a_tuned_shape_is_served_exactly_on_its_gpu_and_raced_on_another() -> None:
    key, how, race = served((8, 1024, 32, 8, 128), torch.bfloat16)
    if bundled_rows_gpu():
        assert how == "exact" and not race, key
    else:  # another GPU's winner is a candidate, not an answer
        assert how == "raced" and len(race) >= 2, (key, how)


def test_an_untuned_shape_races_its_shortlist_and_keeps_the_fastest() -> None:
    key, how, race = served((3, 1000, 32, 8, 128), torch.bfloat16)
    assert how == "raced" and len(race) >= 2
    # the earliest candidate within RACE_MARGIN of the fastest median (tuner.runners.race)
    fastest = min(median for _, median in race)
    assert key == next(k for k, median in race if median <= fastest * (1 + RACE_MARGIN))


def test_a_new_head_layout_races_its_winners_neighbours_too() -> None:
    """40 query heads on one K/V head: a layout the store never tuned. The race's winner then
    races its one-parameter neighbours; the served kernel is right."""
    shape = (1, 1024, 40, 1, 128)
    key, how, race = served(shape, torch.bfloat16)
    keys = [k for k, _ in race]
    # the shortlist (8 or more where the layout is new), then the winner's neighbours, once each
    assert how in ("raced", "refined") and len(keys) == len(set(keys)) >= 12 and key in keys, (how, keys)
    dout = torch.randn(1, 1024, 3, 40, 128, device="cuda", dtype=torch.bfloat16)
    atol, rtol = TOLERANCE[torch.bfloat16]
    exact = reference_backward(dout.double(), 1)
    torch.testing.assert_close(repkv_backward(dout, 1).double(), exact, atol=atol, rtol=rtol)


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


def test_the_op_serves_shapes_tuned_fed_their_fed_winner_unless_repkv_l2_is_cold(tmp_path: Path) -> None:
    """REPKV_L2 is read at import: a fresh interpreter for each setting."""
    if not bundled_rows_gpu():
        pytest.skip("the bundled rows are the H200's: on another GPU the op races, whatever REPKV_L2 says")
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
    assert bad.returncode != 0 and "REPKV_L2='warm' names no L2 state" in bad.stderr


def test_mha_is_a_copy_of_the_same_bytes_and_serves_no_kernel() -> None:
    dout = torch.randn(2, 64, 3, 16, 96, device="cuda", dtype=torch.bfloat16)
    assert torch.equal(repkv_backward(dout, 16), dout.view(2, 64, 48, 96))
    out = torch.empty(2, 64, 48, 96, device="cuda", dtype=torch.bfloat16)
    assert repkv_backward(dout, 16, out=out) is out and torch.equal(out, dout.view(2, 64, 48, 96))
    assert torch.equal(torch.ops.repkv_tune.repkv_backward(dout, 16), dout.view(2, 64, 48, 96))
    assert served((2, 64, 16, 16, 96), torch.bfloat16) == ("copy", "copy", ())
