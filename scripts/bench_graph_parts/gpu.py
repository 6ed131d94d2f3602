"""What the graph benchmark opens on the GPU once, before its pairs: PyTorch on CuPy's device
and stream, the results' index (cold and fed), the held measures' L2 flushes, the graph timer,
the CUDA kernels and what the empty kernel writes."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

import cupy as cp
import torch

from results.index import build_index
from results.schema import DEFAULT_HOLD_US
from results.store import bundled_results_dir, load_results, read_dirs
from tuner.runners.gpu.kernels import Kernels
from tuner.runners.gpu.peers import share_stream_with_torch
from tuner.runners.gpu.timing import L2Flusher
from tuner.runners.gpu.torch_peers import configure_dynamo
from variants import FAMILIES

from .graphs import GraphTimer


@dataclass
class Gpu:
    device: Any  # cupy.cuda.Device
    index: Any  # results.index.StoreIndex, every row
    fed_index: Any  # the same in L2 state fed
    held_flushes: dict[str, L2Flusher]  # the held measures' flush and hold, by measure
    timer: GraphTimer
    sink: torch.Tensor  # what the empty kernel writes
    kernels: Kernels
    sm_count: int


def open_gpu(args: argparse.Namespace) -> Gpu:
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
    timer = GraphTimer(int(device.attributes.get("L2CacheSize", 64 * 2**20)))
    sink = torch.empty(1, device="cuda")
    kernels = Kernels(FAMILIES)
    sm_count = int(device.attributes["MultiProcessorCount"])
    return Gpu(device, index, fed_index, held_flushes, timer, sink, kernels, sm_count)
