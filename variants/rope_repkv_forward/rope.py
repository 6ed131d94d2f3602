"""What the two fused RoPE ops share: llm.c's freqs_cis, the rotation in float64 for the
references, and the family bases (the `.cu` templates are compiled after `rope.cuh`).

llm.c's convention (karpathy/llm.c, branch llama3, llmc/rope.cuh and train_llama3.cu), checked
line by line:

- `precompute_freqs_cis` (rope.cuh:10-44) runs on the CPU in float: freq_i = 1.0f / powf(theta,
  (float)(2*i) / dim) for i < dim/2, angle = (float)t * freq_i, then freqs_cis[t*dim + 2i] =
  cosf(angle) and [t*dim + 2i + 1] = sinf(angle), stored as floatX. train_llama3.cu:444-449 calls
  it with dim = hd, end = T and the model's rope_theta (500000 for Llama 3) and use_scaled_rope;
  we take use_scaled = 0 (no scaling).
- `rope_forward_kernel1` (rope.cuh:46-71): one thread per pair; `if (qkv == 2) return` (v is
  never rotated, q and k are); freqs_idx = t*head_dim + 2*d with t the position in the sequence;
  the pair is read into float and written as out[2d] = x0*cos - x1*sin, out[2d+1] = x0*sin +
  x1*cos, each rounded once to floatX.
- `rope_backward_inplace_kernel1` (rope.cuh:73-97): the transpose, dinp[2d] = d0*cos + d1*sin,
  dinp[2d+1] = -d0*sin + d1*cos, in float, rounded to floatX, in place (q and k only).
- train_llama3.cu:719-721: repkv_forward into qkv_rep_scratch, then rope_forward in place on it
  with n_head = NH (so every K replica is rotated, identically); :924-926: rope_backward_inplace
  on dl_bt4c (B, T, 3, NH, HD), then repkv_backward (llmc/repkv.cuh:51-96, 113-121) sums each
  group in float and rounds to floatX.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from variants.dtypes import DType
from variants.family import (
    BLOCK_SIZES,
    COMMON_HEADER,
    LOAD_HINTS,
    STORE_HINTS,
    Family,
    GridTerm,
    Launch,
    Param,
    ceil_div,
    vector_reject,
)
from variants.shape import INT32_MAX, Shape
from variants.word_family import VEC_BYTES, WordFamily

ROPE_HEADER = Path(__file__).resolve().parent / "rope.cuh"
THETA = 500000.0  # Llama 3's rope_theta


def freqs_cis(shape: Shape, xp: Any = np) -> Any:
    """llm.c's precompute_freqs_cis(dim=HD, end=T, theta=500000, use_scaled=0), in float32:
    (T, HD), (cos, sin) of t * freq_i in columns (2i, 2i+1); an odd HD's last column is 0."""
    half = shape.HD // 2
    i = xp.arange(half, dtype=xp.float32)
    exponent = (2 * i) / xp.float32(shape.HD)
    freq = xp.float32(1.0) / xp.power(xp.float32(THETA), exponent)
    angle = xp.arange(shape.T, dtype=xp.float32)[:, None] * freq[None, :]
    out = xp.zeros((shape.T, shape.HD), dtype=xp.float32)
    out[:, 0 : 2 * half : 2] = xp.cos(angle)
    out[:, 1 : 2 * half : 2] = xp.sin(angle)
    return out


def cos_sin(freqs: Any, shape: Shape, positions: Any, xp: Any) -> tuple[Any, Any]:
    """(cos, sin), each (tokens, 1, HD/2), of each token's position, from the decoded freqs_cis.
    Its rows are counted from HD alone: `shape` is a chunk of the sequence, not the whole."""
    rows = xp.asarray(freqs, dtype=xp.float64).reshape(-1, shape.HD)[xp.asarray(positions)]
    return rows[:, None, 0::2], rows[:, None, 1::2]


def rotate(x: Any, cos: Any, sin: Any, xp: Any, backward: bool = False) -> Any:
    """RoPE of the pairs (2i, 2i+1) of x (tokens, heads, HD) in float64: llm.c's forward
    rotation, or with backward=True its transpose."""
    x0, x1 = x[..., 0::2], x[..., 1::2]
    if backward:
        o0, o1 = x0 * cos + x1 * sin, -x0 * sin + x1 * cos
    else:
        o0, o1 = x0 * cos - x1 * sin, x0 * sin + x1 * cos
    return xp.stack([o0, o1], axis=-1).reshape(x.shape)


def odd_hd(shape: Shape) -> str | None:
    if shape.HD % 2:
        return f"HD={shape.HD} is odd: RoPE rotates (2i, 2i+1) pairs"
    return None


def rope_shape_rule(shape: Shape) -> tuple[str, str] | None:
    """The RoPE ops' rule over every family (`Op.shape_rule`)."""
    reason = odd_hd(shape)
    return None if reason is None else ("HD", reason)


def qkv_numel(shape: Shape) -> int:
    """Elements of the larger tensor, the replicated (B, T, 3, NH, HD) one (3*NH >= NH +
    2*NH_KV heads), which bounds every offset into either tensor and into freqs_cis (T*HD)."""
    return shape.tokens * 3 * shape.NH * shape.HD


class RopeFamily(Family):
    """A family of a fused RoPE op: its template is compiled after common.cuh and rope.cuh.
    Its threads run over `token_heads(shape)` heads of HD elements per token: the packed qkv's
    NH + 2*NH_KV (or its gradient's), unless a family runs over the replicated output. A word
    holds whole RoPE pairs (`vector_rule`, for the families that take one)."""

    @cached_property
    def source(self) -> str:
        parts = (COMMON_HEADER, ROPE_HEADER, self.template_path)
        return "\n".join(part.read_text() for part in parts)

    def token_heads(self, shape: Shape) -> int:
        return shape.heads_in

    def vector_rule(self, shape: Shape, dtype: DType, vec_bytes: int) -> str | None:
        return rope_vector_reject(shape, dtype, vec_bytes)


class RopeNaive(RopeFamily):
    """One thread per output element, int indices as llm.c's kernels; the baseline."""

    name = "naive"
    layout_free = True
    doc = "llm.c's unfused chain per element: one thread per output element, int indices"
    params = (Param("block", BLOCK_SIZES, "threads per block"),)

    def threads(self, shape: Shape, p: Mapping[str, Any]) -> int:
        return ceil_div(shape.tokens * self.token_heads(shape) * shape.HD, p["block"]) * p["block"]

    def reject(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> str | None:
        largest = max(self.threads(shape, p), qkv_numel(shape))
        if largest > INT32_MAX:
            return f"(B, T, 3, NH, HD) has {qkv_numel(shape)} elements; llm.c's int indices stop at 2^31"
        return odd_hd(shape)

    def template_args(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> list[str]:
        return [dtype.ctype]

    def launch(self, shape: Shape, dtype: DType, p: Mapping[str, Any], sm_count: int) -> Launch:
        return Launch(self.threads(shape, p) // p["block"], p["block"])

    def grid_terms(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> tuple[GridTerm, ...]:
        return (GridTerm(1, self.token_heads(shape) * shape.HD, p["block"]),)


def rope_vector_reject(shape: Shape, dtype: DType, vec_bytes: int) -> str | None:
    """A word must hold whole (x0, x1) pairs: two elements at least, and HD % width == 0."""
    if vec_bytes < 2 * dtype.itemsize:
        return f"a {vec_bytes}-byte word holds less than one RoPE pair of {dtype.name}"
    return vector_reject(shape, dtype, vec_bytes)


class RopeVec(RopeFamily, WordFamily):
    """One thread per vec_bytes word of `token_heads` heads a token; 64-bit indices where needed."""

    name = "vec"
    doc = "one thread per vector word of the output, whole RoPE pairs a word"
    params = (
        Param("block", BLOCK_SIZES, "threads per block"),
        Param("vec_bytes", VEC_BYTES, "bytes per load and store (whole RoPE pairs)"),
        Param("load", LOAD_HINTS, "global load of the activations: plain, __ldg or __ldcs"),
        Param("store", STORE_HINTS, "global store: plain or __stcs"),
    )

    def token_words(self, shape: Shape, dtype: DType, p: Mapping[str, Any]) -> int:
        return self.token_heads(shape) * shape.HD * dtype.itemsize // p["vec_bytes"]

    def largest_numel(self, shape: Shape) -> int:
        return qkv_numel(shape)
