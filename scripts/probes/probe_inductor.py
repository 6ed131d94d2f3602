"""On the GPU: compile a PyTorch formulation with `torch.compile` several times from cold
caches and dump what Inductor generated (its Triton source and the launch configuration its
autotuner chose); launch the generated kernel directly over every XBLOCK x warps; time all of
them head to head with the tuned kernel (median of rounds); and give each one's kernel
duration from the profiler (CUPTI), with the kernel launched through the compiled function,
through Inductor's own launcher (`autotuner.run`, into a fixed or a fresh output) and directly.

max-autotune times candidate configurations while it compiles, so two compiles of the same
function can pick different kernels; this shows how far apart they run, and whether a
difference lies in the kernel or around it (`docs/runs/h200_inductor_probe.txt`).

    PYTHONUNBUFFERED=1 python3 scripts/probes/probe_inductor.py --shape B=1,T=512,NH=32,NH_KV=8,HD=64 \
        --dtype bf16 --compiles 4 --out $OUT/inductor 2>&1 | tee $OUT/inductor.log

Writes <out>/<shape>_<dtype>.txt (sources and chosen configurations per compile, fastest
first) and <out>/<shape>_<dtype>.ptx (the PTX of the fastest configuration of the sweep).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))  # bench_kernels

import bench_kernels  # noqa: E402

ROUNDS = 5
SWEEP_XBLOCK = (128, 256, 512, 1024, 2048, 4096, 8192)
SWEEP_WARPS = (1, 2, 4, 8, 16, 32)
SWEEP_KEEP = 6  # sweep configs re-timed in the final rounds


def autotuners() -> dict[int, Any]:
    """Inductor's Triton kernel objects alive in this process (they hold the launchers their
    autotuning kept)."""
    return {id(o): o for o in gc.get_objects() if type(o).__name__ == "CachingAutotuner"}


def describe_kernel(kernel: Any) -> tuple[str, str]:
    """(one line per launcher: its config, registers, spills; the PTX of its launchers)."""
    name = getattr(getattr(kernel, "fn", None), "__name__", "?")
    lines, ptx = [], []
    for launcher in getattr(kernel, "launchers", []) or []:
        config = getattr(launcher, "config", None)
        regs = getattr(launcher, "n_regs", "?")
        spills = getattr(launcher, "n_spills", "?")
        lines.append(f"{name}: {config} regs={regs} spills={spills}")
        binary = getattr(launcher, "bin", None)
        asm = getattr(binary, "asm", None) or {}
        if "ptx" in asm:
            ptx.append(f"// {name} {config}\n{asm['ptx']}")
    if not lines:
        lines.append(f"{name}: no launchers (configs {getattr(kernel, 'configs', '?')})")
    return "\n".join(lines), "\n".join(ptx)


def sweep_launches(bench: Any, shape: Any, dtype: Any, kernel: Any, ptx: dict[str, str]) -> dict[str, Any]:
    """Inductor's generated kernel (a 1-D pointwise kernel over dinp's elements) launched with
    every XBLOCK x warps of the sweep, each validated: name -> launch (and name -> PTX into
    ptx)."""
    import torch
    import triton

    from tuner.runners.gpu.torch_peers import TORCH_DTYPES

    dout, _ = bench.session.buffers(shape, dtype)
    source = bench.device.to_torch(dout, dtype)
    n = shape.dinp_numel
    out_shape = (shape.B, shape.T, shape.heads_in, shape.HD)
    launches = {}
    for xblock in SWEEP_XBLOCK:
        for warps in SWEEP_WARPS:
            if 32 * warps > xblock:
                continue

            def call(xblock: int = xblock, warps: int = warps) -> Any:
                out = torch.empty(out_shape, dtype=TORCH_DTYPES[dtype.name], device="cuda")
                grid = (triton.cdiv(n, xblock),)
                compiled = kernel.fn[grid](source, out, n, XBLOCK=xblock, num_warps=warps, num_stages=1)
                key = f"XBLOCK={xblock},warps={warps}"
                if key not in ptx:  # once, not on every timed call
                    ptx[key] = (getattr(compiled, "asm", None) or {}).get("ptx", "")
                return out

            name = f"XBLOCK={xblock},warps={warps}"
            try:
                bench.require(bench.check_tensor(shape, dtype, call))
            except Exception as exc:
                print(f"  sweep {name}: {type(exc).__name__}: {str(exc)[:200]}")
                continue
            launches[name] = call
    return launches


def kernel_durations(launch: Any, flush: Any, calls: int = 40) -> str:
    """Device-side durations of the kernels `calls` flushed calls of launch ran, from CUPTI
    (torch.profiler's trace): per kernel name, its stream and median microseconds, and the
    median gap from the end of the hold to the start of the next kernel."""
    import json
    import tempfile

    import torch
    from torch.profiler import ProfilerActivity, profile

    launch()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            flush()
            launch()
        torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json") as trace:
        prof.export_chrome_trace(trace.name)
        events = json.loads(Path(trace.name).read_text())["traceEvents"]
    kernels = sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    by_name: dict[tuple[str, Any], list[float]] = {}
    gaps = []
    for i, e in enumerate(kernels):
        by_name.setdefault((e["name"][:40], e.get("args", {}).get("stream")), []).append(e["dur"])
        if e["name"].startswith("hold_ns") and i + 1 < len(kernels):
            gaps.append(kernels[i + 1]["ts"] - (e["ts"] + e["dur"]))
    parts = [f"{n} (stream {st}) {statistics.median(us):.2f} us" for (n, st), us in by_name.items()]
    if gaps:
        parts.append(f"gap hold->kernel {statistics.median(gaps):.2f} us")
    return "; ".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", action="append", required=True)
    parser.add_argument("--dtype", default="bf16")
    parser.add_argument("--formulation", default="sum_cat")
    parser.add_argument("--mode", default=bench_kernels.MAX_AUTOTUNE_MODE)
    parser.add_argument("--compiles", type=int, default=4)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)

    import torch
    from torch._inductor import config as inductor_config
    from torch._inductor.utils import run_and_get_code

    from tuner.runners.gpu import torch_peers

    inductor_config.force_disable_caches = True  # every compile autotunes afresh
    bench_args = bench_kernels.parse_args(
        [*(f"--shape={s}" for s in args.shape), "--dtype", args.dtype, "--peers", "compile"]
    )
    plan = bench_kernels.make_plan(bench_args)
    start = time.perf_counter()
    device = bench_kernels.gpu_device(bench_args, plan)
    torch_peers.configure_dynamo()
    choices = bench_kernels.tuned_choices(None, device.label, plan.pairs, print)
    bench = bench_kernels.PeerBench(plan, device, start, choices=choices)
    args.out.mkdir(parents=True, exist_ok=True)
    for shape, dtype in plan.pairs:
        choice = choices[(shape, dtype.name)]
        if choice is None:
            print(f"{shape.key} {dtype.name}: nothing in the store serves it; skipped")
            continue
        tuned_config = choice.candidate.config
        sides: dict[str, Any] = {"tuned": bench.kernel_launch(shape, dtype, tuned_config)}
        dumps: dict[str, tuple[str, str, str]] = {}
        first_kernel = None
        print(
            f"streams: torch {torch.cuda.current_stream().cuda_stream}, cupy "
            f"{__import__('cupy').cuda.get_current_stream().ptr}"
        )
        for i in range(args.compiles):
            before = autotuners()
            t0 = time.perf_counter()
            launch, codes = run_and_get_code(bench.tensor_launch, shape, dtype, args.formulation, args.mode)
            seconds = time.perf_counter() - t0
            new = [k for key, k in autotuners().items() if key not in before]
            if i == 0:
                first_kernel = next((k for k in new if getattr(k, "launchers", None)), None)
            described = [describe_kernel(k) for k in new]
            name = f"compile{i}"
            sides[name] = launch
            dumps[name] = (
                f"compiled in {seconds:.1f} s\n" + "\n".join(d[0] for d in described),
                "\n\n".join(codes),
                "\n".join(d[1] for d in described),
            )
            print(f"{shape.key} {dtype.name} {name}: {seconds:.1f} s; " + "; ".join(d[0] for d in described))
        ptx: dict[str, str] = {}
        if first_kernel is not None:
            swept = sweep_launches(bench, shape, dtype, first_kernel, ptx)
            once = {name: bench.timed(launch).median_ms for name, launch in swept.items()}
            ranked_once = sorted(once, key=once.get)
            print("  sweep, one median each: " + ", ".join(f"{k} {once[k]:.4f}" for k in ranked_once))
            for name in ranked_once[:SWEEP_KEEP]:
                sides[f"sweep {name}"] = swept[name]
        if first_kernel is not None:
            dinp = torch.empty(
                (shape.B, shape.T, shape.heads_in, shape.HD),
                device="cuda",
                dtype=torch_peers.TORCH_DTYPES[dtype.name],
            )
            source = bench.device.to_torch(bench.session.buffers(shape, dtype)[0], dtype)

            def run_direct(kernel: Any = first_kernel, out: Any = dinp, src: Any = source) -> Any:
                kernel.run(src, out, out.numel(), stream=torch.cuda.current_stream().cuda_stream)
                return out

            def run_fresh(kernel: Any = first_kernel, like: Any = dinp, src: Any = source) -> Any:
                out = torch.empty_like(like)
                kernel.run(src, out, out.numel(), stream=torch.cuda.current_stream().cuda_stream)
                return out

            try:
                bench.require(bench.check_tensor(shape, dtype, run_direct))
                sides["autotuner.run"] = run_direct
                bench.require(bench.check_tensor(shape, dtype, run_fresh))
                sides["autotuner.run fresh"] = run_fresh
            except Exception as exc:
                print(f"  autotuner.run: {type(exc).__name__}: {str(exc)[:300]}")
        profiled = [
            "tuned",
            "compile0",
            "autotuner.run",
            "autotuner.run fresh",
            *[s for s in sides if s.startswith("sweep ")][:2],
        ]
        for side in [s for s in profiled if s in sides]:
            durations = kernel_durations(sides[side], bench.session.flush)
            print(f"  CUPTI {side}: {durations}")
        medians: dict[str, list[float]] = {side: [] for side in sides}
        for round_ in range(ROUNDS):
            order = list(sides) if round_ % 2 == 0 else list(sides)[::-1]
            for side in order:
                medians[side].append(bench.timed(sides[side]).median_ms)
        summary = {side: statistics.median(ms) for side, ms in medians.items()}
        ranked = sorted(summary, key=summary.get)
        tuned_ms = summary["tuned"]
        report = [f"{shape.key} {dtype.name}; tuned {tuned_config.key}"]
        for side in ranked:
            rounds = ", ".join(f"{m:.4f}" for m in medians[side])
            ratio = tuned_ms / summary[side]
            report.append(f"  {side}: {summary[side]:.4f} ms (tuned/this {ratio:.3f}); rounds {rounds}")
        print("\n".join(report), flush=True)
        stem = f"{shape.key.replace('=', '').replace(',', '_')}_{dtype.name}"
        text = ["\n".join(report)]
        for side in [s for s in ranked if s.startswith("compile")]:
            info, source, _ = dumps[side]
            text.append(f"\n===== {side} ({summary[side]:.4f} ms) =====\n{info}\n{source}")
        (args.out / f"{stem}.txt").write_text("\n".join(text))
        fastest = next((s for s in ranked if s.startswith("sweep ")), None)
        if fastest is not None:
            name = fastest.removeprefix("sweep ")
            (args.out / f"{stem}.ptx").write_text(f"// {name}\n{ptx.get(name, '')}")
        bench.release()
        torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
