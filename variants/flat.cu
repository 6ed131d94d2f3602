// flat: Inductor's kernel in CUDA. A 1-D grid over dinp's words (VEC_BYTES each), WORDS words a
// thread at a stride of BLOCK (coalesced per warp), with the head layout compiled in: HDV words
// per head, HEADS = NH + 2*NH_KV heads per token, NREP replicas. Word idx of dinp is word
// d = idx % HDV of head h = (idx / HDV) % HEADS of token idx / (HDV*HEADS): divisions by
// constants, which the compiler turns into multiplies. Query heads copy their word; K/V head
// NH + j sums dout heads NH + j*NREP + r, r < NREP (see common.cuh), in groups of at most 8
// replicas, a group's loads (of every word of the thread) before its adds.
// The NH, NH_KV and HD arguments are not read.
template <typename T, int VEC_BYTES, int HDV, int HEADS, int NREP, int BLOCK, int WORDS, int LOAD, int STORE, typename I>
__global__ void __launch_bounds__(BLOCK, 1) repkv_flat(T* dinp, const T* dout, int B, int T_, int NH_arg, int NH_KV_arg, int HD) {
    using V = Vec<T, VEC_BYTES>;
    using W = typename V::W;
    constexpr int NH = HEADS / (NREP + 2) * NREP;
    constexpr int ROW = HEADS * HDV;  // dinp words per token
    constexpr int GROUP = NREP < 8 ? NREP : 8;
    const W* src = reinterpret_cast<const W*>(dout);
    W* dst = reinterpret_cast<W*>(dinp);
    const I n = I(B) * T_ * ROW;
    const I first = I(blockIdx.x) * (BLOCK * WORDS) + threadIdx.x;

    // Word i of this thread: dinp word at[i], of head h[i]; its first dout word from[i].
    I at[WORDS], from[WORDS];
    int h[WORDS];
#pragma unroll
    for (int i = 0; i < WORDS; i++) {
        at[i] = first + I(i) * BLOCK;
        const I token = at[i] / ROW;
        const int within = int(at[i] - token * ROW);
        h[i] = within / HDV;
        const int head = h[i] < NH ? h[i] : NH + (h[i] - NH) * NREP;  // dout head of replica 0
        from[i] = token * (3 * NH * HDV) + head * HDV + (within - h[i] * HDV);
    }

    W q[WORDS];
#pragma unroll
    for (int i = 0; i < WORDS; i++) {
        if (at[i] < n && h[i] < NH) q[i] = load_word<LOAD>(src + from[i]);
    }
    float acc[WORDS][V::N] = {};
#pragma unroll
    for (int r0 = 0; r0 < NREP; r0 += GROUP) {
        W w[WORDS][GROUP];
#pragma unroll
        for (int i = 0; i < WORDS; i++) {
            if (at[i] < n && h[i] >= NH) {
#pragma unroll
                for (int r = 0; r < GROUP; r++) {
                    if (r0 + r < NREP) w[i][r] = load_word<LOAD>(src + from[i] + (r0 + r) * HDV);
                }
            }
        }
#pragma unroll
        for (int i = 0; i < WORDS; i++) {
#pragma unroll
            for (int r = 0; r < GROUP; r++) {
                if (at[i] < n && h[i] >= NH && r0 + r < NREP) V::accumulate(acc[i], w[i][r]);
            }
        }
    }
#pragma unroll
    for (int i = 0; i < WORDS; i++) {
        if (at[i] < n) store_word<STORE>(dst + at[i], h[i] < NH ? q[i] : V::pack(acc[i]));
    }
}
