"""What one call costs inside a CUDA graph, where no CPU and no event stands between kernels:
the tuned kernel against the peers of the smallest shapes, where their event windows disagree.

For each shape and dtype, every side validated first against a float64 reference:

- `tuned`: the configuration served cold (REPKV_L2=cold) through
  `repkv_tune.ops.repkv_backward(out=...)`;
- `compile[default]:<f>`, `compile[max-autotune]:<f>`: `torch.compile` (dynamic=False) of the
  slice/sum/cat and repeat_kv formulations, the latter mode "max-autotune-no-cudagraphs";
- `triton:autotune`: the autotuned Triton kernel of tuner/gpu/triton_peer.py;
- `copy`: `torch.Tensor.copy_` of half the bytes the kernel moves; `empty`: an empty Triton kernel.

The measures per side:

- `graph_cold`: a graph of N x (L2 flush, call) less a graph of N flushes, per call: the time
  the call adds to a stream that starts it from a cold L2, launch gaps included, no CPU (and
  the write-back of its output that the next flush forces);
- `graph_warm`: a graph of N calls, per call: dout and dinp still in L2 from the call before;
- `graph_fed`: a graph of N x (a kernel writing all of dout, call) less a graph of N such
  writes, per call: dout in L2 as the attention kernel before it in a training step leaves it,
  when the shape fits in L2;
- `held`: the peers benchmark's event window (flush, 150 us hold, events around one call),
  every window kept: its median and p80, the share of windows over 1.25x the median, the CPU's
  time to enqueue one call with its flush and events, and the GPU's time per call;
- `held_long`: the same with a longer hold (--long-hold-us, 1000 us), so that the CPU is far
  ahead of the GPU whatever a call costs it to issue.

`--graphs-only` skips the held measures. Where the results (`--results DIR`, read before the
bundled ones) hold configurations tuned with L2 fed (`python -m tuner --l2 fed`), `tuned:fed`
is what `GET /best?l2=fed` serves. `--configs N` adds, as sides `store#<rank>`, the N
fastest configurations the store holds for the group and each family's fastest there, launched
by CuPy on PyTorch's stream over the same dout and dinp (so `graph_fed` feeds them too): which
of them, if any, leads once dout is in L2; each with a cache hint also as `store#<rank>:plain`,
the same configuration with plain loads and stores.

    python scripts/bench_graph.py --out DIR [--shape B=1,T=512,NH=32,NH_KV=8,HD=64 ...] [--dtype bf16]

By default the peers benchmark's shapes under 40 MB in bf16, in fp32, bf16 and fp16.

Output: `graph.parquet` in `--out` (default `docs/runs/`) and the tables printed; the graph and
L2-fed tables of docs/peers.md and docs/l2-state.md come from its H200 runs,
`docs/runs/h200_graph_probe*.log` and `.parquet`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "docs" / "runs"  # where the runs behind the shipped tables are kept
sys.path.insert(0, str(ROOT))

from results.schema import DEFAULT_HOLD_US  # noqa: E402
from tuner.peer_bench import BENCH_SHAPES  # noqa: E402
from tuner.timing_stats import Windows  # noqa: E402
from variants import FAMILIES, Config, InvalidConfig, Shape, get_dtype  # noqa: E402

if TYPE_CHECKING:
    from results.index import TunedGroup

SMALL_MB = 40  # the peers benchmark's groups under this size in bf16 are the default set
CALLS_PER_GRAPH = 40
REPLAYS = 7  # per round; a graph measure is the median replay of its median round
ROUNDS = 3  # of every graph, and of every side's held windows
GRAPH_MEASURES = ("graph_cold", "graph_warm", "graph_fed")
MEASURES = (*GRAPH_MEASURES, "held", "held_long")
SLOW = 1.25  # a held window over this multiple of its side's median counts as slow
COMPILE_MODES = {"default": "default", "max-autotune": "max-autotune-no-cudagraphs"}


def small_shapes() -> list[Shape]:
    """The peers benchmark's shapes under SMALL_MB in bf16, where event windows disagree."""
    return [s for s in BENCH_SHAPES if s.bytes_moved(get_dtype("bf16")) < SMALL_MB * 1e6]


def leaders(group: TunedGroup | None, n: int) -> list[tuple[int, Config]]:
    """The group's n fastest configurations and each family's fastest, each once, as (rank in
    the group, config) in rank order."""
    if group is None or n <= 0:
        return []
    chosen: dict[int, Config] = dict(enumerate(c.config for c in group.candidates[:n]))
    firsts: dict[str, int] = {}
    for rank, candidate in enumerate(group.candidates):
        firsts.setdefault(candidate.family.name, rank)
    chosen |= {rank: group.candidates[rank].config for rank in firsts.values()}
    return sorted(chosen.items())


def plain_twin(config: Config) -> Config | None:
    """The config with plain global loads and stores, where it has a cache hint (`ldg`, `ldcs`,
    `stcs`) to drop: whether a hint chosen for a cold L2 costs once dout is in it."""
    values = config.values
    if {"load", "store"} - values.keys() or (values["load"], values["store"]) == ("plain", "plain"):
        return None
    return Config.of(config.family, **(values | {"load": "plain", "store": "plain"}))


def per_call_us(replay_ms: float, baseline_ms: float, calls: int) -> float:
    """What one call adds to a graph of `calls` calls: (replay - baseline) / calls, in us."""
    return 1000.0 * (replay_ms - baseline_ms) / calls


def slow_share(windows_ms: list[float], factor: float = SLOW) -> float:
    """The share of windows longer than factor x their median."""
    median = statistics.median(windows_ms)
    return sum(w > factor * median for w in windows_ms) / len(windows_ms)


def median_round(rounds: list[list[float]]) -> float:
    """The median of the rounds' medians (one odd round decides nothing)."""
    return statistics.median(statistics.median(r) for r in rounds)


def relative(measures: dict[str, dict[str, float]], base: str = "tuned") -> dict[str, dict[str, float]]:
    """Each side's measures (those of MEASURES it has) as multiples of `base`'s."""
    return {
        side: {
            f"{m}_x_{base}": measure[f"{m}_us"] / measures[base][f"{m}_us"]
            for m in MEASURES
            if f"{m}_us" in measure
        }
        for side, measure in measures.items()
    }


def merged(runs: list[Windows]) -> Windows:
    """Several runs' windows as one run: every window, the mean CPU and GPU time per call."""
    return Windows(
        np.concatenate([r.ms for r in runs]),
        sum(r.enqueue_us for r in runs) / len(runs),
        sum(r.gpu_us for r in runs) / len(runs),
    )


def held_measures(name: str, windows: Windows) -> dict[str, float]:
    """The held measure `name` of one side from its windows, in us."""
    timing = windows.timing()
    return {
        f"{name}_us": 1000 * timing.median_ms,
        f"{name}_p80_us": 1000 * timing.p80_ms,
        f"{name}_slow_share": slow_share(list(windows.ms)),
        f"{name}_enqueue_us": windows.enqueue_us,
        f"{name}_gpu_us_per_call": windows.gpu_us,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", action="append", help="repeatable (default: small_shapes())")
    parser.add_argument("--dtype", default="fp32,bf16,fp16")
    parser.add_argument("--gpu", default="h200")
    parser.add_argument("--reps", type=int, default=100, help="held windows per side")
    parser.add_argument("--long-hold-us", type=float, default=1000.0, help="the held_long measure's hold")
    parser.add_argument("--graphs-only", action="store_true", help="the graph measures alone")
    parser.add_argument(
        "--configs",
        type=int,
        default=0,
        help="the store's N fastest configurations and each family's fastest",
    )
    parser.add_argument(
        "--results",
        type=Path,
        help="a results directory read before the bundled one (default: the bundled one)",
    )
    parser.add_argument("--out", type=Path, default=RUNS, help="directory (default docs/runs)")
    args = parser.parse_args()
    try:  # bad input says so before any GPU work
        shapes = [Shape.parse(text) for text in args.shape] if args.shape else small_shapes()
        dtypes = [get_dtype(name) for name in args.dtype.split(",")]
    except ValueError as exc:
        parser.error(str(exc))
    os.environ["REPKV_L2"] = "cold"  # `tuned`, the op as served cold (read when it is imported, below)
    try:
        import cupy as cp
        import torch
    except ImportError as exc:
        parser.error(f"needs a GPU host with CuPy, PyTorch and Triton ({exc})")
    args.out.mkdir(parents=True, exist_ok=True)

    from repkv_tune.ops import reference_backward, repkv_backward
    from results.index import build_index, shape_tuple
    from results.selection import select
    from results.store import bundled_results_dir, load_results, read_dirs
    from tuner.gpu import triton_peer
    from tuner.gpu.kernels import CompileError, Kernels
    from tuner.gpu.peers import as_storage, share_stream_with_torch
    from tuner.gpu.timing import L2Flusher, time_windows
    from tuner.gpu.torch_peers import (
        TORCH_DTYPES,
        compile_formulation,
        configure_dynamo,
        repeat_kv_backward,
        sum_cat,
    )

    device = cp.cuda.Device()
    share_stream_with_torch(device.id)
    configure_dynamo()
    dirs = read_dirs(args.results) if args.results else [bundled_results_dir()]
    index = build_index(load_results(dirs)[0])
    fed_index = index.in_state("fed")
    held_flushes = {
        "held": L2Flusher(device, hold_us=DEFAULT_HOLD_US),
        "held_long": L2Flusher(device, hold_us=args.long_hold_us),
    }
    l2_bytes = int(device.attributes.get("L2CacheSize", 64 * 2**20))
    flush_buffer = torch.ones(2 * l2_bytes // 4, device="cuda")
    flush_sink = torch.empty((), device="cuda")

    def graph_flush() -> None:  # reads twice L2's bytes, as L2Flusher does, inside a graph
        torch.amax(flush_buffer, dim=0, out=flush_sink)

    def graph_of(calls: list[Callable[[], Any]]) -> torch.cuda.CUDAGraph:
        """CALLS_PER_GRAPH x the calls, in order, captured in one graph."""
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(CALLS_PER_GRAPH):
                for call in calls:
                    call()
        return graph

    def replay_rounds(graphs: dict[Any, torch.cuda.CUDAGraph]) -> dict[Any, float]:
        """Each graph's replay time in ms: REPLAYS replays a round, ROUNDS rounds in a rotated
        order, its median round's median."""
        timer = torch.cuda.Stream()
        keys = list(graphs)
        times: dict[Any, list[list[float]]] = {key: [] for key in keys}
        for r in range(ROUNDS):
            for key in keys[r % len(keys) :] + keys[: r % len(keys)]:
                round_ = []
                for _ in range(REPLAYS):
                    start = torch.cuda.Event(enable_timing=True)
                    end = torch.cuda.Event(enable_timing=True)
                    with torch.cuda.stream(timer):
                        start.record()
                        graphs[key].replay()
                        end.record()
                    end.synchronize()
                    round_.append(start.elapsed_time(end))
                times[key].append(round_)
        return {key: median_round(rounds) for key, rounds in times.items()}

    sink = torch.empty(1, device="cuda")
    kernels = Kernels(FAMILIES)
    sm_count = int(device.attributes["MultiProcessorCount"])

    def on_torch_stream(run: Callable[[], None]) -> Callable[[], None]:
        def call() -> None:  # CuPy launches on its current stream: PyTorch's, captured or not
            with cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
                run()

        return call

    rows: list[dict[str, Any]] = []
    for shape in shapes:
        dims = (shape.B, shape.T, shape.NH, shape.NH_KV, shape.HD)
        for dtype in dtypes:
            name = dtype.name
            served = select(index, args.gpu, shape, dtype)
            dout = torch.randn(shape.B, shape.T, 3, shape.NH, shape.HD, device="cuda").to(TORCH_DTYPES[name])
            dinp = torch.empty(shape.B, shape.T, shape.heads_in, shape.HD, device="cuda", dtype=dout.dtype)
            half = shape.bytes_moved(dtype) // 2
            src = torch.ones(half, dtype=torch.uint8, device="cuda")
            dst = torch.empty_like(src)
            sides: dict[str, Callable[[], Any]] = {
                "tuned": lambda: repkv_backward(dout, shape.NH_KV, out=dinp),  # noqa: B023
                "triton:autotune": lambda: triton_peer.repkv_backward_triton(dout, dinp, *dims),  # noqa: B023
            }
            configs: dict[str, str] = {"tuned": served.candidate.config.key}
            group = index.groups.get((args.gpu, shape_tuple(shape), name))
            storage = (as_storage(dinp, dtype), as_storage(dout, dtype))  # the same memory, for CuPy
            fed = select(fed_index, args.gpu, shape, dtype)
            if (
                fed is not None and fed.group.l2 == "fed"
            ):  # what GET /best?l2=fed serves (tuned with python -m tuner --l2 fed)
                fed_config = fed.candidate.config
                run = kernels.launcher(shape, dtype, fed_config, sm_count, *storage)
                sides["tuned:fed"] = on_torch_stream(run)
                configs["tuned:fed"] = fed_config.key
            for rank, leader in leaders(group, args.configs):
                twin = plain_twin(leader)
                for side, config in ((f"store#{rank}", leader), (f"store#{rank}:plain", twin)):
                    if config is None:
                        continue
                    try:
                        run = kernels.launcher(shape, dtype, config, sm_count, *storage)
                    except (CompileError, InvalidConfig) as exc:  # a row the current code cannot build
                        print(f"{shape.key} {name} {side} left out: {exc}", flush=True)
                        continue
                    sides[side] = on_torch_stream(run)
                    configs[side] = config.key
            for short, mode in COMPILE_MODES.items():
                for label, formulation in (("sum_cat", sum_cat), ("repeat_kv_bwd", repeat_kv_backward)):
                    compiled = compile_formulation(formulation, mode)
                    sides[f"compile[{short}]:{label}"] = lambda c=compiled: c(dout, *dims)  # noqa: B023
            expected = reference_backward(dout.double(), shape.NH_KV)
            tolerance = 1e-5 if name == "fp32" else 2e-2
            for call in sides.values():
                dinp.fill_(float("nan"))
                result = call()
                got = (dinp if result is None or result.data_ptr() == dinp.data_ptr() else result).double()
                torch.testing.assert_close(got.view_as(expected), expected, rtol=tolerance, atol=tolerance)
            sides["copy"] = lambda: dst.copy_(src)  # noqa: B023
            sides["empty"] = lambda: triton_peer.empty_kernel[(1,)](sink)
            torch.cuda.synchronize()

            def feed() -> None:  # writes all of dout, as the kernel that produced it would
                dout.fill_(0.5)  # noqa: B023

            before: dict[str, Callable[[], Any] | None] = {
                "graph_cold": graph_flush,
                "graph_warm": None,
                "graph_fed": feed,
            }
            graphs: dict[tuple[str, str], torch.cuda.CUDAGraph] = {}
            for measure, first in before.items():
                if first is not None:  # the baseline: what runs before each call, alone
                    graphs[(measure, "")] = graph_of([first])
                for side, call in sides.items():
                    graphs[(measure, side)] = graph_of([first, call] if first else [call])
            replays = replay_rounds(graphs)
            measures: dict[str, dict[str, float]] = {
                side: {
                    f"{m}_us": per_call_us(replays[(m, side)], replays.get((m, ""), 0.0), CALLS_PER_GRAPH)
                    for m in before
                }
                for side in sides
            }
            held_windows: dict[tuple[str, str], list[Windows]] = {}
            for r in range(0 if args.graphs_only else ROUNDS):  # every side, in a rotated order
                names = list(sides)[r % len(sides) :] + list(sides)[: r % len(sides)]
                for side in names:
                    for held, flush in held_flushes.items():
                        windows = time_windows(sides[side], flush, reps=args.reps)
                        held_windows.setdefault((held, side), []).append(windows)
            for (held, side), runs in held_windows.items():
                measures[side] |= held_measures(held, merged(runs))
            ratios = relative(measures)
            for side, measure in measures.items():
                rows.append(
                    {
                        **shape.as_dict(),
                        "shape": shape.key,
                        "dtype": name,
                        "MB": shape.bytes_moved(dtype) / 1e6,
                    }
                    | {"side": side, "config": configs.get(side, "")}
                    | measure
                    | ratios[side]
                    | {
                        "gpu": torch.cuda.get_device_name(),
                        "gpu_label": args.gpu,
                        "calls_per_graph": CALLS_PER_GRAPH,
                    }
                )
                figures = "".join(
                    f" {m} {measure[m + '_us']:6.2f} ({ratios[side][m + '_x_tuned']:.3f})"
                    for m in MEASURES
                    if m + "_us" in measure
                )
                if "held_us" in measure:
                    figures += (
                        f" p80 {measure['held_p80_us']:6.2f} slow {measure['held_slow_share']:.2f}"
                        f" enqueue {measure['held_enqueue_us']:5.1f}"
                        f" gpu {measure['held_gpu_us_per_call']:5.1f} us/call"
                    )
                print(f"{shape.key:32} {name} {side:36}{figures}", flush=True)
            pd.DataFrame(rows).to_parquet(args.out / "graph.parquet", index=False)
            del graphs
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
