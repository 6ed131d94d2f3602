// warp_sum: repkv_backward's warp_sum (variants/warp_sum.cu) with the rotation: query-rotate
// blocks, and each K/V group summed by one warp that reads its NREP*HDV replica words as one
// contiguous run (lane l: words l, l+32, ..., all word d = l % HDV since HDV divides 32), adds its
// lanes by shuffles (xor HDV, ..., 16), and rotates the sum back once if j < NH_KV (k, not v);
// lanes l < HDV store word (token, NH + j, l). A query word (token, h, d) is rotated back alone.
// The position is t = token % T_, its freqs_cis word t*HDV + d; each word is rounded once.
// HDV and NREP are compile-time constants (0: read at run time, warp_sum_runtime); a thread keeps
// ITEMS loads in flight.
template <typename T, int VEC_BYTES, int HDV_C, int NREP_C, int ITEMS, int BLOCK, int TAIL, int LOAD, int STORE, typename I>
__global__ void __launch_bounds__(BLOCK, 1) repkv_rope_backward_warp_sum(T* dinp, const T* dout, const T* freqs_cis,
                                                                      int B, int T_, int NH, int NH_KV, int HD) {
    using V = Vec<T, VEC_BYTES>;
    using W = typename V::W;
    static_assert(32 % (HDV_C ? HDV_C : 32) == 0 && BLOCK % 32 == 0, "a warp holds whole heads, a block whole warps");
    // HDV_C, NREP_C 0 (warp_sum_runtime): the layout's, read at run time, where a head's words divide 32
    const int HDV = HDV_C ? HDV_C : HD * int(sizeof(T)) / VEC_BYTES;
    const int NREP = NREP_C ? NREP_C : NH / NH_KV;
    const int RUN = NREP * HDV;    // words of one K/V group's replicas
    const int LOADS = (RUN + 31) / 32;  // of them, per lane
    const W* src = reinterpret_cast<const W*>(dout);
    const W* freqs = reinterpret_cast<const W*>(freqs_cis);
    W* dst = reinterpret_cast<W*>(dinp);
    const I tokens = I(B) * T_;
    const I heads_in = NH + 2 * NH_KV;
    const I q_row = I(NH) * HDV;  // query words per token
    const I q_words = tokens * q_row;
    const I q_per_block = I(BLOCK) * ITEMS;
    const I q_blocks = (q_words + q_per_block - 1) / q_per_block;

    // Copy blocks spread evenly over the grid, one division deciding the role (split.cu says
    // why), but for the last TAIL/8 of them, which run after every reduce block: a reduce warp's loads
    // are LOADS/ITEMS round trips in a row, so a reduce block started last holds the kernel open
    // while the rest of the GPU drains. Blocks blk >= grid - tail copy, as copy block
    // (q - tail) + (blk - (grid - tail)); the others interleave q - tail copy blocks evenly.
    const unsigned long long tail = (unsigned long long)q_blocks * TAIL / 8;
    const unsigned long long grid = gridDim.x - tail, blk = blockIdx.x;
    const unsigned long long q = (unsigned long long)q_blocks - tail;
    unsigned long long before, rem = 0;
    if (blk >= grid) {
        before = q + (blk - grid);
    } else if (grid * q <= 0xFFFFFFFFull) {
        const unsigned product = unsigned(blk) * unsigned(q);
        before = product / unsigned(grid);
        rem = product - unsigned(before) * unsigned(grid);
    } else {
        before = blk * q / grid;
        rem = blk * q - before * grid;
    }
    const bool role_q = blk >= grid || rem + q >= grid;
    const I index = role_q ? I(before) : I(blk - before);

    if (role_q) {
        const I base = index * q_per_block + threadIdx.x;
        W w[ITEMS];
        I to[ITEMS], token[ITEMS];
        int d[ITEMS];
#pragma unroll
        for (int i = 0; i < ITEMS; i++) {
            const I q = base + I(i) * BLOCK;
            if (q < q_words) {
                token[i] = q / q_row;
                const I off = q - token[i] * q_row;
                d[i] = int(off % HDV);
                w[i] = load_word<LOAD>(src + token[i] * 3 * q_row + off);
                to[i] = token[i] * heads_in * HDV + off;
            }
        }
#pragma unroll
        for (int i = 0; i < ITEMS; i++) {
            if (base + I(i) * BLOCK < q_words) {
                const int t = int(token[i]) % T_;
                w[i] = rope_word<true, T, VEC_BYTES>(w[i], freqs + t * HDV + d[i]);
            }
        }
#pragma unroll
        for (int i = 0; i < ITEMS; i++) {
            if (base + I(i) * BLOCK < q_words) store_word<STORE>(dst + to[i], w[i]);
        }
        return;
    }

    const I group = index * (BLOCK / 32) + threadIdx.x / 32;
    const I kv_groups = tokens * 2 * NH_KV;
    if (group >= kv_groups) return;  // the same for every lane of a warp: the shuffles stay whole
    const int lane = threadIdx.x % 32;
    const I token = group / (2 * NH_KV);
    const I j = group - token * (2 * NH_KV);
    const W* run = src + (token * 3 * NH + NH + j * NREP) * HDV + lane;
    float acc[V::N] = {};
    for (int l0 = 0; l0 < LOADS; l0 += ITEMS) {
        W w[ITEMS];
#pragma unroll
        for (int i = 0; i < ITEMS; i++) {
            if (l0 + i < LOADS && lane + (l0 + i) * 32 < RUN) w[i] = load_word<LOAD>(run + (l0 + i) * 32);
        }
#pragma unroll
        for (int i = 0; i < ITEMS; i++) {
            if (l0 + i < LOADS && lane + (l0 + i) * 32 < RUN) V::accumulate(acc, w[i]);
        }
    }
#pragma unroll
    for (int offset = HDV; offset < 32; offset *= 2) {
#pragma unroll
        for (int e = 0; e < V::N; e++) acc[e] += __shfl_xor_sync(0xffffffffu, acc[e], offset);
    }
    if (lane < HDV) {
        const int t = int(token % T_);
        if (j < NH_KV) rope_rotate<true, T, VEC_BYTES>(acc, freqs + t * HDV + lane);
        store_word<STORE>(dst + (token * heads_in + NH + j) * HDV + lane, V::pack(acc));
    }
}
