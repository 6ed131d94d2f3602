"""llm.c's RoPE kernels as the chain benchmark compiles and launches them (no GPU here: the
source, its kernels' names and their launch geometry; bench_chain_parts.gpu compiles it with
CuPy's RawModule)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from variants import DType, Shape
from variants.family import COMMON_HEADER, COMPILE_OPTIONS, ceil_div
from variants.shape import INT32_MAX

ROPE_SOURCE_PATH = Path(__file__).resolve().parents[2] / "results" / "llmc_rope.cuh"
LLMC_COMMIT = "ae6917f6f260d714de5715872385f7e1e976c4a3"  # karpathy/llm.c, llmc/rope.cuh (llama3)
LLMC_BLOCK = 128  # llm.c's hard-coded block size (rope_forward, rope_backward_inplace, repkv)
OPTIONS = COMPILE_OPTIONS
KERNELS = {False: "llmc_rope_forward_kernel1", True: "llmc_rope_backward_inplace_kernel1"}


@cache
def rope_source() -> str:
    """The compilation unit: variants/common.cuh (its fp16/bf16 includes), then the kernels."""
    return COMMON_HEADER.read_text() + "\n" + ROPE_SOURCE_PATH.read_text()


def rope_expression(dtype: DType, backward: bool) -> str:
    """The name expression of llm.c's forward (or backward in-place) RoPE kernel for dtype."""
    return f"{KERNELS[backward]}<{dtype.ctype}>"


def rope_threads(shape: Shape) -> int:
    """One thread per (x0, x1) pair of the (B, T, 3, NH, HD) tensor, v's included."""
    return shape.tokens * 3 * shape.NH * shape.HD // 2


def rope_grid(shape: Shape, block: int) -> int:
    return ceil_div(rope_threads(shape), block)


def rope_reject(shape: Shape, block: int) -> str | None:
    """Why llm.c's RoPE kernel cannot serve the shape at this block, or None."""
    if shape.HD % 2:
        return f"HD={shape.HD} is odd: RoPE rotates (2i, 2i+1) pairs"
    elements = shape.tokens * 3 * shape.NH * shape.HD
    if max(elements, rope_grid(shape, block) * block) > INT32_MAX:
        return f"(B, T, 3, NH, HD) has {elements} elements; llm.c's int indices stop at 2^31"
    return None
