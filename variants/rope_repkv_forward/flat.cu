// flat: replicate's layout with the head layout compiled in and WORDS words of inp a thread,
// BLOCK apart (coalesced per warp). Inp word `at` is word d = at % HDV of head h = (at / HDV) %
// HEADS of token at / (HDV*HEADS): divisions by constants, which the compiler turns into
// multiplies; the position t = token % T_ is one 32-bit division. Every word and its freqs_cis
// word are loaded, q and k words rotated (h < NH + NH_KV), before any store. Inp head h < NH is
// out head h; NH + j (K heads, then V heads) is out heads NH + j*NREP + r, r < NREP.
// The NH, NH_KV and HD arguments are not read.
template <typename T, int VEC_BYTES, int HDV, int HEADS, int NREP, int BLOCK, int WORDS, int LOAD, int STORE, typename I>
__global__ void __launch_bounds__(BLOCK) rope_repkv_forward_flat(T* out, const T* inp, const T* freqs_cis, int B,
                                                                 int T_, int NH_arg, int NH_KV_arg, int HD) {
    using W = typename Vec<T, VEC_BYTES>::W;
    constexpr int NH_KV = HEADS / (NREP + 2);
    constexpr int NH = NH_KV * NREP;
    constexpr int ROW = HEADS * HDV;  // inp words per token
    const I n = I(B) * T_ * ROW;
    const I first = I(blockIdx.x) * (BLOCK * WORDS) + threadIdx.x;

    W w[WORDS];
    I token[WORDS];
    int h[WORDS], d[WORDS];
#pragma unroll
    for (int i = 0; i < WORDS; i++) {
        const I at = first + I(i) * BLOCK;
        token[i] = at / ROW;
        const int within = int(at - token[i] * ROW);
        h[i] = within / HDV;
        d[i] = within - h[i] * HDV;
        if (at < n) w[i] = load_word<LOAD>(reinterpret_cast<const W*>(inp) + at);
    }
#pragma unroll
    for (int i = 0; i < WORDS; i++) {
        if (first + I(i) * BLOCK < n && h[i] < NH + NH_KV) {
            const int t = int(token[i]) % T_;
            w[i] = rope_word<false, T, VEC_BYTES>(w[i], reinterpret_cast<const W*>(freqs_cis) + t * HDV + d[i]);
        }
    }
#pragma unroll
    for (int i = 0; i < WORDS; i++) {
        if (first + I(i) * BLOCK >= n) continue;
        const int head = h[i] < NH ? h[i] : NH + (h[i] - NH) * NREP;  // out head of replica 0
        W* to = reinterpret_cast<W*>(out) + token[i] * (3 * NH * HDV) + head * HDV + d[i];
        if (h[i] < NH) {
            store_word<STORE>(to, w[i]);
        } else {
#pragma unroll
            for (int r = 0; r < NREP; r++) store_word<STORE>(to + r * HDV, w[i]);
        }
    }
}
