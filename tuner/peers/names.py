"""The peers benchmark's vocabulary: its shapes, the peer groups a run selects, the kinds of
row, the peers' names and the rows' statuses (no GPU, no pandas)."""

from __future__ import annotations

from tuner.cli.presets import DEFAULT_SHAPES, MODELS
from variants import Shape

# Shapes of 8-32 MB in every dtype, where a launch's fixed cost shows (bytes_moved, fp32: about
# 19, 21 and 31 MB; half that in bf16 and fp16).
SMALL_SHAPES: tuple[Shape, ...] = (
    MODELS["llama3.2-1b"].shape(1, 512),
    MODELS["gemma2-2b"].shape(1, 512),
    MODELS["qwen2.5-0.5b"].shape(1, 2048),
)
BENCH_SHAPES: tuple[Shape, ...] = DEFAULT_SHAPES + SMALL_SHAPES
QUICK_SHAPES: tuple[Shape, ...] = (MODELS["llama3.2-1b"].shape(1, 512), MODELS["llama3-8b"].shape(8, 1024))
QUICK_DTYPES = ("bf16",)

# Peer groups a run can select (--peers); the copy, the empty launch and the tuned kernel
# are always measured.
PEER_GROUPS = ("llmc", "eager", "compile", "max-autotune", "triton")

# Kinds of row; the fastest peer is the fastest ok row among PEER_KINDS.
CEILING, LAUNCH, TUNED = "ceiling", "launch", "tuned"
LLMC, EAGER, COMPILED, TRITON = "llm.c", "torch eager", "torch.compile", "triton"
PEER_KINDS = (LLMC, EAGER, COMPILED, TRITON)
# The last pass: the tuned kernel and the pair's fastest peer again, in interleaved rounds.
HEAD_TO_HEAD = "head to head"
H2H_ROUNDS = 5
H2H_PREFIX = "h2h:"
# The device-time pass (tuner.runners.kernel_trace): per pair, the copy, the empty launch, the tuned
# kernel and the DEVICE_PEERS fastest peers, DEVICE_CALLS profiled calls each.
DEVICE_PEERS = 4
DEVICE_CALLS = 40

COPY_PEER = "copy"
EMPTY_PEER = "empty_launch"
TUNED_PEER = "tuned"
TRITON_PEER = "triton:autotune"
LLMC_SEED_BLOCK = 128

STATUS_OK = "ok"
STATUS_SKIPPED = "skipped"


def llmc_peer(block: int) -> str:
    return f"llm.c k1@{block}"


def eager_peer(formulation: str) -> str:
    return f"eager:{formulation}"


def compile_peer(mode: str, formulation: str) -> str:
    short = "max-autotune" if mode.startswith("max-autotune") else mode
    return f"compile[{short}]:{formulation}"


def head_to_head_peer(peer: str) -> str:
    return f"{H2H_PREFIX}{peer}"


LLMC_SEED = llmc_peer(LLMC_SEED_BLOCK)
