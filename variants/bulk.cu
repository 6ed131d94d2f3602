// bulk (sm_90): the bulk asynchronous copy engine moves whole tiles between global and shared
// memory (cp.async.bulk, completion on an mbarrier), so a thread issues no global load or
// store at all; persistent blocks keep STAGES tiles in flight each.
//
// A tile is G*NREP consecutive heads (TILE = G*NREP*HD elements, contiguous) of one of the three
// NH-head segments of a token's dout row (seg 0 q, 1 k, 2 v). With C = NH_KV / G tiles per
// segment, tile u is (token, seg, c) = (u / (3C), (u / C) % 3, u % C), at dout element
// ((token*3 + seg)*NH + c*G*NREP)*HD. A q tile is stored back unchanged at dinp element
// (token*heads_in + c*G*NREP)*HD; a k or v tile is summed over its NREP replicas into G heads
// (OUT = G*HD elements) at dinp element (token*heads_in + NH + (seg-1)*NH_KV + c*G)*HD.
//
// Block b takes tiles b, b + grid, b + 2*grid, ...: its k-th tile lives in stage k % STAGES.
// Per tile: every thread waits for the stage's mbarrier; a k/v tile is summed into out[k % 3]
// (16-byte words out of shared memory); one barrier; thread 0 then stores the tile (q: straight
// out of its stage) as one bulk group, waits until the previous group has been read out of
// shared memory, and refills the previous tile's stage with the tile STAGES further on.
// Groups up to k-1 are read before barrier k+1, so out[(k+1) % 3] (last used by k-2) is free.
// HINT 1: loads carry an L2 evict-first policy (dout is read once).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ unsigned smem_address(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void bulk_wait(unsigned long long* bar, unsigned parity) {
    unsigned done = 0;
    while (!done) {
        asm volatile(
            "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
            : "=r"(done)
            : "r"(smem_address(bar)), "r"(parity)
            : "memory");
    }
}

template <int HINT>
__device__ __forceinline__ void bulk_load(void* dst, const void* src, unsigned bytes, unsigned long long* bar,
                                          unsigned long long policy) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_address(bar)), "r"(bytes)
                 : "memory");
    if constexpr (HINT == 1) {
        asm volatile(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(
                smem_address(dst)),
            "l"(src), "r"(bytes), "r"(smem_address(bar)), "l"(policy)
            : "memory");
    } else {
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                         smem_address(dst)),
                     "l"(src), "r"(bytes), "r"(smem_address(bar))
                     : "memory");
    }
}

__device__ __forceinline__ void bulk_store(void* dst, const void* src, unsigned bytes) {
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst), "r"(smem_address(src)),
                 "r"(bytes)
                 : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
#endif

template <typename T, int BLOCK, int HD, int NREP, int G, int STAGES, int HINT>
__global__ void __launch_bounds__(BLOCK) repkv_bulk(T* dinp, const T* dout, int B, int T_, int NH, int NH_KV, int HD_) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    using V = Vec<T, 16>;
    using W = typename V::W;
    constexpr int TILE = G * NREP * HD;
    constexpr int OUT = G * HD;
    constexpr int HDV = HD * int(sizeof(T)) / 16;  // 16-byte words per head
    static_assert(HD * sizeof(T) % 16 == 0, "a head must be whole 16-byte words");
    __shared__ alignas(128) T in[STAGES][TILE];
    __shared__ alignas(128) T out[3][OUT];
    __shared__ alignas(8) unsigned long long full[STAGES];

    const long long C = NH_KV / G;
    const long long tiles = (long long)B * T_ * 3 * C;
    const long long heads_in = NH + 2 * NH_KV;
    const long long stride = gridDim.x;
    unsigned long long policy = 0;
    if constexpr (HINT == 1) asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));

    auto source = [&](long long u) { return dout + (u / C * NH + (u % C) * G * NREP) * HD; };  // u/C = token*3+seg
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) {
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_address(&full[s])) : "memory");
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        for (int s = 0; s < STAGES; s++) {
            const long long u = blockIdx.x + s * stride;
            if (u < tiles) bulk_load<HINT>(in[s], source(u), TILE * sizeof(T), &full[s], policy);
        }
    }
    __syncthreads();

    int k = 0;
    for (long long u = blockIdx.x; u < tiles; u += stride, k++) {
        const int s = k % STAGES;
        bulk_wait(&full[s], (k / STAGES) & 1);
        const long long row = u / C;  // token*3 + seg
        const long long token = row / 3;
        const int seg = int(row - token * 3);
        const long long c = u - row * C;
        T* o = out[k % 3];
        if (seg > 0) {
            const W* src = reinterpret_cast<const W*>(in[s]);
            W* dst = reinterpret_cast<W*>(o);
            for (int w = threadIdx.x; w < G * HDV; w += BLOCK) {
                const int g = w / HDV;
                const int d = w - g * HDV;
                float acc[V::N] = {};
#pragma unroll
                for (int r = 0; r < NREP; r++) V::accumulate(acc, src[(g * NREP + r) * HDV + d]);
                dst[w] = V::pack(acc);
            }
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            if (seg == 0) {
                bulk_store(dinp + (token * heads_in + c * G * NREP) * HD, in[s], TILE * sizeof(T));
            } else {
                bulk_store(dinp + (token * heads_in + NH + (seg - 1) * NH_KV + c * G) * HD, o, OUT * sizeof(T));
            }
            asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
            const long long next = u + (STAGES - 1) * stride;  // the tile STAGES after the previous one
            if (k > 0 && next < tiles) {
                const int prev = (k - 1) % STAGES;
                bulk_load<HINT>(in[prev], source(next), TILE * sizeof(T), &full[prev], policy);
            }
        }
    }
    if (threadIdx.x == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
#else
    __trap();  // the bulk copy engine and mbarrier transactions need sm_90
#endif
}
