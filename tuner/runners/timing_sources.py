"""The CUDA sources of the timing harness (`tuner.runners.gpu.timing`), kept apart from CuPy so that
they compile offline (NVRTC) and their launch geometry is checked without a GPU."""

from __future__ import annotations

# A wait on the GPU's global timer, issued after the flush so that the CPU has queued the timed
# call before the GPU reaches it.
HOLD_SOURCE = r"""
extern "C" __global__ void hold_ns(unsigned long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}
"""

# The two ways to copy on the device. cudaMemcpyAsync is what most code calls, but on the H200
# it took up to 1.35x the time of this 16-byte kernel at byte counts that are not multiples of a
# large power of two (odd token counts: `docs/runs/h200_hbm_floor_odd.log`); so the
# copy a kernel is held to is the faster of the two (results.schema.COPY_FASTEST in the rows).
COPY_METHODS = ("memcpy", "kernel")
COPY_BLOCK = 256
COPY_KERNEL_SOURCE = r"""
extern "C" __global__ void copy_words(uint4* __restrict__ dst, const uint4* __restrict__ src,
                                      unsigned long long words, unsigned char* __restrict__ dst_tail,
                                      const unsigned char* __restrict__ src_tail, unsigned tail) {
    const unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < words) dst[i] = src[i];
    if (i < tail) dst_tail[i] = src_tail[i];
}
"""


def copy_geometry(nbytes: int) -> tuple[int, int, int]:
    """(16-byte words, tail bytes, blocks of COPY_BLOCK) of the copy kernel for nbytes: thread i
    copies word i and, where i < tail, byte i of the last nbytes % 16."""
    words, tail = divmod(nbytes, 16)
    return words, tail, max(1, -(-max(words, tail) // COPY_BLOCK))
