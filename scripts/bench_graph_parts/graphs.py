"""The graph measures: CUDA graphs of CALLS_PER_GRAPH calls of each side, after an L2 flush
(graph_cold), alone (graph_warm) or after a kernel writing all of dout (graph_fed), each less
the graph of what runs before the calls alone, and their replay times."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .arithmetic import CALLS_PER_GRAPH, REPLAYS, ROUNDS, median_round, per_call_us


class GraphTimer:
    """Captures graphs of calls and times their replays, with an L2 flush that runs inside a
    graph."""

    def __init__(self, l2_bytes: int) -> None:
        self.flush_buffer = torch.ones(2 * l2_bytes // 4, device="cuda")
        self.flush_sink = torch.empty((), device="cuda")

    def flush(self) -> None:  # reads twice L2's bytes, as L2Flusher does, inside a graph
        torch.amax(self.flush_buffer, dim=0, out=self.flush_sink)

    def graph_of(self, calls: list[Callable[[], Any]]) -> torch.cuda.CUDAGraph:
        """CALLS_PER_GRAPH x the calls, in order, captured in one graph."""
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(CALLS_PER_GRAPH):
                for call in calls:
                    call()
        return graph

    def replay_rounds(self, graphs: dict[Any, torch.cuda.CUDAGraph]) -> dict[Any, float]:
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


def graph_measures(
    timer: GraphTimer, sides: dict[str, Callable[[], Any]], dout: torch.Tensor
) -> tuple[dict[str, dict[str, float]], dict[tuple[str, str], torch.cuda.CUDAGraph]]:
    """Each side's graph measures (`<measure>_us`, per call), and the graphs (the caller lets
    them go once the pair is done)."""

    def feed() -> None:  # writes all of dout, as the kernel that produced it would
        dout.fill_(0.5)

    before: dict[str, Callable[[], Any] | None] = {
        "graph_cold": timer.flush,
        "graph_warm": None,
        "graph_fed": feed,
    }
    graphs: dict[tuple[str, str], torch.cuda.CUDAGraph] = {}
    for measure, first in before.items():
        if first is not None:  # the baseline: what runs before each call, alone
            graphs[(measure, "")] = timer.graph_of([first])
        for side, call in sides.items():
            graphs[(measure, side)] = timer.graph_of([first, call] if first else [call])
    replays = timer.replay_rounds(graphs)
    measures = {
        side: {
            f"{m}_us": per_call_us(replays[(m, side)], replays.get((m, ""), 0.0), CALLS_PER_GRAPH)
            for m in before
        }
        for side in sides
    }
    return measures, graphs
