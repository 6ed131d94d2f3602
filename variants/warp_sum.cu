// warp_sum: split's query-copy blocks, and K/V groups each summed by one warp reading its
// replicas as one contiguous run, for large nrep (MQA) at small HD. HDV (words per head, a
// divisor of 32) and NREP are compile-time constants, or read from the layout at run time where
// both template arguments are 0 (warp_sum_runtime: one kernel for every layout).
//
// Copy blocks (as split.cu): q runs over (token, h < NH, d < HDV), the same offset
// off = q % (NH*HDV) in the token's dout row (3*NH*HDV words) and dinp row (heads_in*HDV
// words); a thread takes ITEMS words BLOCK apart, all loads before its first store.
//
// Reduce blocks: BLOCK/32 warps, warp g over (token, j < 2*NH_KV). The NREP replicas of dinp head
// (token, NH + j) are dout heads NH + j*NREP + r, r < NREP (common.cuh): NREP*HDV consecutive
// words from (token*3*NH + NH + j*NREP)*HDV. Lane l loads words l, l+32, l+64, ... of that run
// (each warp load is 32 consecutive words, ITEMS of them in flight) and sums them in float;
// since HDV divides 32, all of them are word d = l % HDV of some replica. The 32/HDV lanes of one
// d then add their sums by shuffles (xor HDV, 2*HDV, ..., 16), and lanes l < HDV store word
// (token, NH + j, l). Where a thread of `split` loads NREP words HDV apart (a warp load touches
// 32/HDV separate runs), a warp here streams the group's bytes in order.
template <typename T, int VEC_BYTES, int HDV_C, int NREP_C, int ITEMS, int BLOCK, int TAIL, int LOAD, int STORE, typename I>
__global__ void __launch_bounds__(BLOCK, 1) repkv_warp_sum(T* dinp, const T* dout, int B, int T_, int NH, int NH_KV, int HD) {
    using V = Vec<T, VEC_BYTES>;
    using W = typename V::W;
    static_assert(32 % (HDV_C ? HDV_C : 32) == 0 && BLOCK % 32 == 0, "a warp holds whole heads, a block whole warps");
    // HDV_C, NREP_C 0 (warp_sum_runtime): the layout's, read at run time, where a head's words divide 32
    const int HDV = HDV_C ? HDV_C : HD * int(sizeof(T)) / VEC_BYTES;
    const int NREP = NREP_C ? NREP_C : NH / NH_KV;
    const int RUN = NREP * HDV;    // words of one K/V group's replicas
    const int LOADS = (RUN + 31) / 32;  // of them, per lane
    const W* src = reinterpret_cast<const W*>(dout);
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
        I to[ITEMS];
#pragma unroll
        for (int i = 0; i < ITEMS; i++) {
            const I q = base + I(i) * BLOCK;
            if (q < q_words) {
                const I token = q / q_row;
                const I off = q - token * q_row;
                w[i] = load_word<LOAD>(src + token * 3 * q_row + off);
                to[i] = token * heads_in * HDV + off;
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
    if (lane < HDV) store_word<STORE>(dst + (token * heads_in + NH + j) * HDV + lane, V::pack(acc));
}
