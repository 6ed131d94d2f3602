"""The streaming kernels: each the fastest of 16-byte words at 256 or 512 threads and 1, 2 or 4
words a thread, over buffers of the op's read and write bytes. CuPy is imported only when the
launches are built."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

WORD = 16  # bytes per load and store of the streaming kernels
BLOCKS = (256, 512)
PER_THREAD = (1, 2, 4)
KINDS = ("read", "write", "copy", "twin")
# the kernels compiled: the twin is `twin` where the op reads at least as many bytes as it
# writes (the backward ops), `twin_out` where it writes more (the forward ops)
KERNELS = (*KINDS, "twin_out")

# Word i of a thread is base + k*blockDim.x, k < PER: each warp's accesses are contiguous.
# twin (R >= W): input word j is written to output word o(j) = (j * f) >> 32 with f = W/R in
# 32.32 fixed point, by the one j where o steps (o(j+1) > o(j)): so about W of the R threads
# store, in order, and reads and writes stay interleaved at the ratio R:W all through the kernel.
# twin_out (W > R): the mirror, one thread a word of the output: output word j is a copy of input
# word i(j) = (j * f) >> 32 with f = R/W; the threads of a warp that load one word share its
# load (one request), so each input word is read once and every output word is stored once.
STREAM_SOURCE = r"""
template <int PER> __global__ void hbm_read(const uint4* __restrict__ src, long long n, uint4* sink) {
    const long long base = (long long)blockIdx.x * blockDim.x * PER + threadIdx.x;
    unsigned acc = 0;
#pragma unroll
    for (int k = 0; k < PER; k++) {
        const long long i = base + (long long)k * blockDim.x;
        if (i < n) { const uint4 w = src[i]; acc ^= w.x ^ w.y ^ w.z ^ w.w; }
    }
    if (acc == 0x9E3779B9u) sink[0] = make_uint4(acc, 0, 0, 0);  // never, with the fill: keeps the loads
}
template <int PER> __global__ void hbm_write(uint4* __restrict__ dst, long long n) {
    const long long base = (long long)blockIdx.x * blockDim.x * PER + threadIdx.x;
#pragma unroll
    for (int k = 0; k < PER; k++) {
        const long long i = base + (long long)k * blockDim.x;
        if (i < n) dst[i] = make_uint4(unsigned(i), 0, 0, 0);
    }
}
template <int PER>
__global__ void hbm_copy(uint4* __restrict__ dst, const uint4* __restrict__ src, long long n) {
    const long long base = (long long)blockIdx.x * blockDim.x * PER + threadIdx.x;
#pragma unroll
    for (int k = 0; k < PER; k++) {
        const long long i = base + (long long)k * blockDim.x;
        if (i < n) dst[i] = src[i];
    }
}
template <int PER>
__global__ void hbm_twin(uint4* __restrict__ dst, const uint4* __restrict__ src, long long n,
                         unsigned long long f) {
    const long long base = (long long)blockIdx.x * blockDim.x * PER + threadIdx.x;
    uint4 w[PER];
#pragma unroll
    for (int k = 0; k < PER; k++) {
        const long long i = base + (long long)k * blockDim.x;
        if (i < n) w[k] = src[i];
    }
#pragma unroll
    for (int k = 0; k < PER; k++) {
        const unsigned long long i = base + (long long)k * blockDim.x;
        const unsigned long long o = (i * f) >> 32;
        if (i < (unsigned long long)n && ((i + 1) * f) >> 32 > o) dst[o] = w[k];
    }
}
template <int PER>
__global__ void hbm_twin_out(uint4* __restrict__ dst, const uint4* __restrict__ src, long long n,
                             unsigned long long f) {
    const long long base = (long long)blockIdx.x * blockDim.x * PER + threadIdx.x;
    uint4 w[PER];
#pragma unroll
    for (int k = 0; k < PER; k++) {
        const unsigned long long o = base + (long long)k * blockDim.x;
        if (o < (unsigned long long)n) w[k] = src[(o * f) >> 32];
    }
#pragma unroll
    for (int k = 0; k < PER; k++) {
        const long long o = base + (long long)k * blockDim.x;
        if (o < n) dst[o] = w[k];
    }
}
"""


def twin_fraction(read_words: int, write_words: int) -> int:
    """write/read words in 32.32 fixed point, rounded up: twin's step between output words (so
    the last of read_words steps lands on write_words exactly, and every output word is stored)."""
    return -(-(write_words << 32) // read_words)


def twin_plan(read_words: int, write_words: int) -> tuple[str, int, int]:
    """(kernel, words its threads run over, step f) of the twin: `twin` over the input words with
    f = W/R where the op writes no more than it reads; else `twin_out` over the output words
    with f = R/W (the same rounding, the streams' roles swapped)."""
    if write_words <= read_words:
        return "twin", read_words, twin_fraction(read_words, write_words)
    return "twin_out", write_words, twin_fraction(write_words, read_words)


def twin_pairs(read_words: int, write_words: int) -> list[tuple[int, int]]:
    """(input word loaded, output word stored) by each word of the twin's threads, in order, -1
    for none: the kernels' index math, for the tests."""
    kernel, n, f = twin_plan(read_words, write_words)
    steps = [((j * f) >> 32, ((j + 1) * f) >> 32 > (j * f) >> 32) for j in range(n)]
    if kernel == "twin":
        return [(j, o if stored else -1) for j, (o, stored) in enumerate(steps)]
    return [(i, j) for j, (i, _) in enumerate(steps)]


def twin_targets(read_words: int, write_words: int) -> list[int]:
    """The output word each word of the twin's threads stores to, in order (-1: none)."""
    return [o for _, o in twin_pairs(read_words, write_words)]


def stream_buffers(first_input: Any, output: Any, read_bytes: int, write_bytes: int, xp: Any) -> tuple:
    """(src, dst) as bytes, of whole words of the op's read and write bytes: over the op's own
    first input and output where they hold that many (repkv backward, repkv forward), else a
    buffer of their own (the RoPE ops read freqs_cis too). src is filled with ones."""
    src, dst = first_input.view(xp.uint8), output.view(xp.uint8)
    if src.size < read_bytes:
        src = xp.empty(read_bytes, dtype=xp.uint8)
    if dst.size < write_bytes:
        dst = xp.empty(write_bytes, dtype=xp.uint8)
    src.fill(1)
    return src[: read_bytes // WORD * WORD], dst[: write_bytes // WORD * WORD]


def streaming_launchers(
    read_bytes: int, write_bytes: int, buffers: tuple[Any, Any]
) -> dict[str, dict[str, Callable[[], None]]]:
    """kind -> {variant name: launch} over the op's (first input, output) `buffers`."""
    import cupy as cp

    rw, ww = read_bytes // WORD, write_bytes // WORD
    half = (read_bytes + write_bytes) // 2 // WORD
    src, dst = stream_buffers(*buffers, read_bytes, write_bytes, cp)
    sink = cp.empty(WORD, dtype=cp.uint8)
    copy_src = cp.ones(half * WORD, dtype=cp.uint8)
    copy_dst = cp.empty(half * WORD, dtype=cp.uint8)
    module = _module()
    twin, twin_n, f = twin_plan(rw, ww)
    out: dict[str, dict[str, Callable[[], None]]] = {kind: {} for kind in KINDS}
    for block in BLOCKS:
        for per in PER_THREAD:

            def grid(n: int, block: int = block, per: int = per) -> tuple[int]:
                return (-(-n // (block * per)),)

            name = f"block={block},per={per}"
            k = {kind: module.get_function(f"hbm_{kind}<{per}>") for kind in KERNELS}
            out["read"][name] = _bind(k["read"], grid(rw), block, (src, cp.int64(rw), sink))
            out["write"][name] = _bind(k["write"], grid(ww), block, (dst, cp.int64(ww)))
            out["copy"][name] = _bind(k["copy"], grid(half), block, (copy_dst, copy_src, cp.int64(half)))
            twin_args = (dst, src, cp.int64(twin_n), cp.uint64(f))
            out["twin"][name] = _bind(k[twin], grid(twin_n), block, twin_args)
    return out


def _bind(kernel: Any, grid: tuple[int], block: int, args: tuple) -> Callable[[], None]:
    def launch() -> None:
        kernel(grid, (block,), args)

    return launch


_MODULE: Any = None


def _module() -> Any:
    global _MODULE
    if _MODULE is None:
        import cupy as cp

        names = [f"hbm_{kind}<{per}>" for kind in KERNELS for per in PER_THREAD]
        _MODULE = cp.RawModule(code=STREAM_SOURCE, options=("-std=c++17",), name_expressions=names)
    return _MODULE
