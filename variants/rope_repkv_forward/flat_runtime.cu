// flat_runtime: flat (flat.cu) with the head layout read at run time: WORDS words of inp a thread,
// BLOCK apart (coalesced per warp), hdv = HD / N words a head, heads = NH + 2*NH_KV a token. The
// thread's first word `first` is word within0 = first % row of token token0 = first / row (one
// division of the index type); word i is `step` = within0 + i*BLOCK words past token0's start:
// token token0 + step / row, word step % row of it, all in int (row + 1024 < 2^31: Python's
// reject). Word w of a token is word d = w % hdv of head h = w / hdv. Every word and its freqs_cis
// word are loaded, q and k words rotated (h < NH + NH_KV), before any store. Inp head h < NH is
// out head h; NH + j (K heads, then V heads) is out heads NH + j*nrep + r, r < nrep.
template <typename T, int VEC_BYTES, int BLOCK, int WORDS, int LOAD, int STORE, typename I>
__global__ void __launch_bounds__(BLOCK) rope_repkv_forward_flat_runtime(T* out, const T* inp, const T* freqs_cis,
                                                                         int B, int T_, int NH, int NH_KV, int HD) {
    using W = typename Vec<T, VEC_BYTES>::W;
    const int hdv = HD / Vec<T, VEC_BYTES>::N;
    const int nrep = NH / NH_KV;
    const int row = (NH + 2 * NH_KV) * hdv;  // inp words per token
    const I n = I(B) * T_ * row;
    const I first = I(blockIdx.x) * (BLOCK * WORDS) + threadIdx.x;
    const I token0 = first / row;
    const int within0 = int(first - token0 * row);
    const int t0 = int(token0 % T_);

    W w[WORDS];
    I token[WORDS];
    int h[WORDS], d[WORDS], t[WORDS];
#pragma unroll
    for (int i = 0; i < WORDS; i++) {
        const int step = within0 + i * BLOCK;
        const int tokens = step / row;
        const int within = step - tokens * row;
        token[i] = token0 + tokens;
        t[i] = (t0 + tokens) % T_;
        h[i] = within / hdv;
        d[i] = within - h[i] * hdv;
        if (first + I(i) * BLOCK < n) w[i] = load_word<LOAD>(reinterpret_cast<const W*>(inp) + first + I(i) * BLOCK);
    }
#pragma unroll
    for (int i = 0; i < WORDS; i++) {
        if (first + I(i) * BLOCK < n && h[i] < NH + NH_KV) {
            const W* cs = reinterpret_cast<const W*>(freqs_cis) + I(t[i]) * hdv + d[i];
            w[i] = rope_word<false, T, VEC_BYTES>(w[i], cs);
        }
    }
#pragma unroll
    for (int i = 0; i < WORDS; i++) {
        if (first + I(i) * BLOCK >= n) continue;
        const int head = h[i] < NH ? h[i] : NH + (h[i] - NH) * nrep;  // out head of replica 0
        W* to = reinterpret_cast<W*>(out) + token[i] * (3 * NH * hdv) + I(head) * hdv + d[i];
        const int count = h[i] < NH ? 1 : nrep;
        for (int r = 0; r < count; r++) store_word<STORE>(to + I(r) * hdv, w[i]);
    }
}
