// rotate_runtime: nrep 1 (NH == NH_KV), where dinp (B, T, 3*NH, HD) has dout's layout and nothing
// is summed: each word of dout is rotated back (q and k, heads h < 2*NH) or copied (v) to the
// same place of dinp. rope_repkv_forward's flat_runtime with one replica and the transposed
// rotation: WORDS words a thread, BLOCK apart (coalesced per warp), hdv = HD / N words a head,
// row = 3*NH*hdv words a token. The thread's first word `first` is word within0 = first % row of
// token token0 = first / row (one division of the index type); word i is `step` = within0 +
// i*BLOCK words past token0's start: token token0 + step / row, word step % row of it, all in int
// (row + 1024 < 2^31: Python's reject). Word w of a token is word d = w % hdv of head h = w / hdv.
// Every word and its freqs_cis word are loaded before any store. NH_KV is not read (it is NH).
template <typename T, int VEC_BYTES, int BLOCK, int WORDS, int LOAD, int STORE, typename I>
__global__ void __launch_bounds__(BLOCK) repkv_rope_backward_rotate_runtime(T* dinp, const T* dout, const T* freqs_cis,
                                                                           int B, int T_, int NH, int NH_KV, int HD) {
    using W = typename Vec<T, VEC_BYTES>::W;
    const int hdv = HD / Vec<T, VEC_BYTES>::N;
    const int row = 3 * NH * hdv;  // words per token, of dout and of dinp
    const I n = I(B) * T_ * row;
    const I first = I(blockIdx.x) * (BLOCK * WORDS) + threadIdx.x;
    const I token0 = first / row;
    const int within0 = int(first - token0 * row);
    const int t0 = int(token0 % T_);

    W w[WORDS];
    int h[WORDS], d[WORDS], t[WORDS];
#pragma unroll
    for (int i = 0; i < WORDS; i++) {
        const int step = within0 + i * BLOCK;
        const int tokens = step / row;
        const int within = step - tokens * row;
        t[i] = (t0 + tokens) % T_;
        h[i] = within / hdv;
        d[i] = within - h[i] * hdv;
        if (first + I(i) * BLOCK < n) w[i] = load_word<LOAD>(reinterpret_cast<const W*>(dout) + first + I(i) * BLOCK);
    }
#pragma unroll
    for (int i = 0; i < WORDS; i++) {
        if (first + I(i) * BLOCK < n && h[i] < 2 * NH) {
            const W* cs = reinterpret_cast<const W*>(freqs_cis) + I(t[i]) * hdv + d[i];
            w[i] = rope_word<true, T, VEC_BYTES>(w[i], cs);
        }
    }
#pragma unroll
    for (int i = 0; i < WORDS; i++) {
        if (first + I(i) * BLOCK < n) store_word<STORE>(reinterpret_cast<W*>(dinp) + first + I(i) * BLOCK, w[i]);
    }
}
