// flat: repkv_backward's flat (variants/flat.cu) with the rotation: a 1-D grid over dinp's words,
// WORDS words a thread BLOCK apart, the head layout compiled in (HDV words a head, HEADS = NH +
// 2*NH_KV heads a token, NREP replicas). Dinp word `at` is word d = at % HDV of head h = (at /
// HDV) % HEADS of token at / (HDV*HEADS): divisions by constants. Query heads take their word;
// K/V head NH + j sums dout heads NH + j*NREP + r, r < NREP (common.cuh) in float, in groups of
// GROUP replicas (GROUP <= NREP; a group's loads, of every word of the thread, before its adds). q and the
// summed k (h < NH + NH_KV) are rotated back once at position t = token % T_ (one 32-bit
// division), then each word is rounded once. The NH, NH_KV and HD arguments are not read.
template <typename T, int VEC_BYTES, int HDV, int HEADS, int NREP, int BLOCK, int WORDS, int GROUP, int LOAD, int STORE,
          typename I>
__global__ void __launch_bounds__(BLOCK, 1) repkv_rope_backward_flat(T* dinp, const T* dout, const T* freqs_cis, int B,
                                                                  int T_, int NH_arg, int NH_KV_arg, int HD) {
    using V = Vec<T, VEC_BYTES>;
    using W = typename V::W;
    constexpr int NH_KV = HEADS / (NREP + 2);
    constexpr int NH = NH_KV * NREP;
    constexpr int ROW = HEADS * HDV;  // dinp words per token
    const W* src = reinterpret_cast<const W*>(dout);
    const I n = I(B) * T_ * ROW;
    const I first = I(blockIdx.x) * (BLOCK * WORDS) + threadIdx.x;

    // Word i of this thread: dinp word at[i] of head h[i], offset d[i]; its first dout word from[i].
    I at[WORDS], from[WORDS], token[WORDS];
    int h[WORDS], d[WORDS];
#pragma unroll
    for (int i = 0; i < WORDS; i++) {
        at[i] = first + I(i) * BLOCK;
        token[i] = at[i] / ROW;
        const int within = int(at[i] - token[i] * ROW);
        h[i] = within / HDV;
        d[i] = within - h[i] * HDV;
        const int head = h[i] < NH ? h[i] : NH + (h[i] - NH) * NREP;  // dout head of replica 0
        from[i] = token[i] * (3 * NH * HDV) + head * HDV + d[i];
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
        if (at[i] < n && h[i] < NH) V::accumulate(acc[i], q[i]);
        if (at[i] < n && h[i] < NH + NH_KV) {
            const int t = int(token[i]) % T_;
            rope_rotate<true, T, VEC_BYTES>(acc[i], reinterpret_cast<const W*>(freqs_cis) + t * HDV + d[i]);
        }
    }
#pragma unroll
    for (int i = 0; i < WORDS; i++) {
        if (at[i] < n) store_word<STORE>(reinterpret_cast<W*>(dinp) + at[i], V::pack(acc[i]));
    }
}
