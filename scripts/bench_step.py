"""Does replication belong in a PyTorch training step? One Llama-style GQA attention block
(qkv projection -> K/V replication -> scaled-dot-product attention -> output projection,
forward and backward, bf16) timed three ways in one process on the same data:

    repeat_kv   HF-style replication with PyTorch ops (expand + reshape), then SDPA
    repkv_op    this project's op (repkv_tune.ops.repkv: index_select forward, tuned backward)
    sdpa_gqa    no replication: SDPA with enable_gqa=True

each in eager mode, under torch.compile (dynamic=False, reset between sizes) and replayed as
one CUDA graph. The PyTorch profiler splits the eager and compiled steps' GPU time into
matrix products, attention, and the rest (replication and the packing copies around it).
Also the CPU cost per call of the op beside plain PyTorch ops of the same size.

    python scripts/bench_step.py --out DIR

Output: `step.parquet` and `cpu_cost.parquet` in `--out` (default `docs/runs/`), the tables
printed; the step-time and CPU-cost tables of docs/pytorch.md come from its H200 runs,
`docs/runs/h200_step.*`, `h200_cpu_cost.*` and `h200x2_cpu_cost.*`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from repkv_tune.launcher import LAUNCHERS
from repkv_tune.ops import repkv, repkv_backward, served

RUNS = Path(__file__).resolve().parents[1] / "docs" / "runs"  # the runs behind the shipped tables

# (B, T, NH, NH_KV, HD)
SIZES = [(4, 2048, 32, 8, 128), (8, 2048, 14, 2, 64), (2, 2048, 64, 8, 128)]
PATHS = ("repeat_kv", "repkv_op", "sdpa_gqa")
MODES = ("eager", "compile", "cuda_graph")


def repeat_kv(x: torch.Tensor, nrep: int) -> torch.Tensor:
    """HF transformers' repeat_kv on (B, H, T, D)."""
    B, H, T, D = x.shape
    return x[:, :, None, :, :].expand(B, H, nrep, T, D).reshape(B, H * nrep, T, D)


class Block(torch.nn.Module):
    def __init__(self, NH: int, NH_KV: int, HD: int, path: str) -> None:
        super().__init__()
        self.NH, self.NH_KV, self.HD, self.path = NH, NH_KV, HD, path
        C = NH * HD
        self.qkv = torch.nn.Linear(C, (NH + 2 * NH_KV) * HD, bias=False)
        self.out = torch.nn.Linear(C, C, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        NH, NH_KV, HD = self.NH, self.NH_KV, self.HD
        qkv = self.qkv(x).view(B, T, NH + 2 * NH_KV, HD)
        if self.path == "repkv_op":
            q, k, v = repkv(qkv, NH, NH_KV).unbind(2)  # each (B, T, NH, HD)
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            q, k, v = qkv.split([NH, NH_KV, NH_KV], dim=2)
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (B, H, T, HD)
            if self.path == "repeat_kv":
                k, v = repeat_kv(k, NH // NH_KV), repeat_kv(v, NH // NH_KV)
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return self.out(y.transpose(1, 2).reshape(B, T, C))


def cuda_ms(step: Callable[[], None], steps: int = 20, rounds: int = 3) -> float:
    """Median over rounds of the mean step time (CUDA events around `steps` steps)."""
    times = []
    for _ in range(rounds):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(steps):
            step()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / steps)
    return statistics.median(times)


def kernel_split(step: Callable[[], None]) -> dict[str, float]:
    """GPU time per step by kind of kernel, from the PyTorch profiler (3 steps)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            step()
        torch.cuda.synchronize()
    split = {"matmul": 0.0, "attention": 0.0, "replication_and_copies": 0.0}
    for event in prof.key_averages():
        device_us = getattr(event, "device_time_total", None) or getattr(event, "cuda_time_total", 0.0)
        if not device_us or event.key.startswith(("aten::", "autograd::", "repkv_tune::", "Torch-Compiled")):
            continue  # CPU-side ops carry their kernels' time too; count kernels only
        name = event.key.lower()
        if any(k in name for k in ("gemm", "cutlass", "nvjet", "xmma", "sm90_", "cublas")):
            split["matmul"] += device_us
        elif any(k in name for k in ("flash", "fmha", "attention", "sdpa", "mha")):
            split["attention"] += device_us
        else:
            split["replication_and_copies"] += device_us
    return {k: v / 3 / 1000 for k, v in split.items()}  # ms per step


def run_size(size: tuple[int, int, int, int, int], log: Callable[[str], None]) -> list[dict]:
    B, T, NH, NH_KV, HD = size
    torch.manual_seed(0)
    x = torch.randn(B, T, NH * HD, device="cuda", dtype=torch.bfloat16)
    grad = torch.randn_like(x)
    base = Block(NH, NH_KV, HD, "repeat_kv").cuda().to(torch.bfloat16)
    rows = []
    grads: dict[str, torch.Tensor] = {}
    for path in PATHS:
        block = Block(NH, NH_KV, HD, path).cuda().to(torch.bfloat16)
        block.load_state_dict(base.state_dict())
        for mode in MODES:
            torch._dynamo.reset()
            fn = torch.compile(block, dynamic=False) if mode == "compile" else block
            static_x = x.clone().requires_grad_(True)

            def step(fn=fn, static_x=static_x, block=block) -> None:
                static_x.grad = None
                for p in block.parameters():
                    p.grad = None
                fn(static_x).backward(grad)

            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    step()
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
            if mode == "eager":
                grads[path] = static_x.grad.float().clone()
            timed = step
            if mode == "cuda_graph":
                graph = torch.cuda.CUDAGraph()
                for p in block.parameters():
                    p.grad = None
                static_x.grad = None
                with torch.cuda.graph(graph):
                    fn(static_x).backward(grad)
                timed = graph.replay
            ms = cuda_ms(timed)
            split = kernel_split(timed) if mode != "cuda_graph" else {}
            row = {
                "B": B,
                "T": T,
                "NH": NH,
                "NH_KV": NH_KV,
                "HD": HD,
                "tokens": B * T,
                "path": path,
                "mode": mode,
                "step_ms": ms,
                **{f"{k}_ms": v for k, v in split.items()},
            }
            rows.append(row)
            share = split["replication_and_copies"] / sum(split.values()) if split else None
            note = f"  replication+copies {share:.1%}" if share is not None else ""
            log(f"{B},{T},{NH},{NH_KV},{HD} {path:<10} {mode:<10} {ms:8.3f} ms{note}")
    reference = grads["repeat_kv"]
    for path in PATHS[1:]:
        err = (grads[path] - reference).norm() / reference.norm()
        log(f"  input grad of {path} vs repeat_kv: relative error {err:.2e}")
        if not err < 2e-2:
            raise SystemExit(f"{path} computes another gradient than repeat_kv ({err:.2e})")
    key, how, _ = served((B, T, NH, NH_KV, HD), torch.bfloat16)
    log(f"  the op's backward: {key} ({how})")
    return rows


def cpu_cost(log: Callable[[str], None], calls: int = 20000) -> list[dict]:
    """Wall time per call, in a loop whose kernels are tiny (the CPU is the bottleneck)."""
    B, T, NH, NH_KV, HD = 1, 16, 32, 8, 128
    dout = torch.randn(B, T, 3, NH, HD, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(B, T, NH + 2 * NH_KV, HD, device="cuda", dtype=torch.bfloat16)
    op, op_out = torch.ops.repkv_tune.repkv_backward, torch.ops.repkv_tune.repkv_backward_out
    candidates: dict[str, Callable[[], object]] = {
        "repkv_backward(dout, NH_KV)": lambda: repkv_backward(dout, NH_KV),
        "repkv_backward(dout, NH_KV, out=out)": lambda: repkv_backward(dout, NH_KV, out=out),
        "torch.ops.repkv_tune.repkv_backward (dispatcher)": lambda: op(dout, NH_KV),
        "torch.ops.repkv_tune.repkv_backward_out (dispatcher)": lambda: op_out(dout, NH_KV, out),
        "torch: dout.clone()": lambda: dout.clone(),
        "torch: dout.sum(2)": lambda: dout.sum(2),
        "torch: torch.add(out, 1, out=out)": lambda: torch.add(out, 1, out=out),
    }
    rows = []
    for name, call in candidates.items():
        for _ in range(200):
            call()
        torch.cuda.synchronize()
        samples = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(calls // 5):
                call()
            samples.append((time.perf_counter() - start) / (calls // 5) * 1e6)
            torch.cuda.synchronize()
        us = statistics.median(samples)
        rows.append({"call": name, "cpu_us_per_call": us})
        log(f"{name:<45} {us:6.2f} us per call")
    return rows


def markdown(step: pd.DataFrame) -> str:
    lines = [
        "| B,T,NH,NH_KV,HD | path | eager ms | compile ms | CUDA graph ms | replication+copies (eager) |",
        "|---|---|---|---|---|---|",
    ]
    for (size, path), group in step.groupby(["size", "path"], sort=False):
        by = group.set_index("mode")
        eager = by.loc["eager"]
        share = eager["replication_and_copies_ms"] / (
            eager["matmul_ms"] + eager["attention_ms"] + eager["replication_and_copies_ms"]
        )
        lines.append(
            f"| {size} | {path} | {by.loc['eager', 'step_ms']:.3f} | {by.loc['compile', 'step_ms']:.3f} | "
            f"{by.loc['cuda_graph', 'step_ms']:.3f} | {share:.1%} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=RUNS, help="directory (default docs/runs)")
    parser.add_argument("--quick", action="store_true", help="the first size only")
    parser.add_argument("--cpu-cost-only", action="store_true", help="only the CPU cost per call")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    def log(text: str) -> None:
        print(text, flush=True)

    log(f"{torch.cuda.get_device_name()} torch {torch.__version__}")
    if args.cpu_cost_only:
        cost = pd.DataFrame(cpu_cost(log))
        cost["gpu_name"] = torch.cuda.get_device_name()
        cost.to_parquet(args.out / "cpu_cost.parquet", index=False)
        return 0
    rows = []
    for size in SIZES[:1] if args.quick else SIZES:
        rows += run_size(size, log)
    step = pd.DataFrame(rows)
    step["gpu_name"] = torch.cuda.get_device_name()
    step["size"] = step[["B", "T", "NH", "NH_KV", "HD"]].astype(str).agg(",".join, axis=1)
    step.to_parquet(args.out / "step.parquet", index=False)
    cost = pd.DataFrame(cpu_cost(log))
    cost["gpu_name"] = torch.cuda.get_device_name()
    cost.to_parquet(args.out / "cpu_cost.parquet", index=False)
    log(f"launchers built: {len(LAUNCHERS._by_key)}")
    log(markdown(step))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
