// flat: replicate's layout with the head layout compiled in and WORDS words of inp a thread,
// BLOCK apart (coalesced per warp), their loads in flight together before any store. Inp word
// `at` is word d = at % HDV of head h = (at / HDV) % HEADS of token at / (HDV*HEADS): divisions by
// constants, which the compiler turns into multiplies. Inp head h < NH is out head h; inp head
// NH + j (K heads, then V heads) is out heads NH + j*NREP + r, r < NREP (see replicate.cu).
// The NH, NH_KV and HD arguments are not read.
template <typename T, int VEC_BYTES, int HDV, int HEADS, int NREP, int BLOCK, int WORDS, int LOAD, int STORE, typename I>
__global__ void __launch_bounds__(BLOCK) repkv_forward_flat(T* out, const T* inp, int B, int T_, int NH_arg,
                                                            int NH_KV_arg, int HD) {
    using W = typename Vec<T, VEC_BYTES>::W;
    constexpr int NH = HEADS / (NREP + 2) * NREP;
    constexpr int ROW = HEADS * HDV;  // inp words per token
    const I n = I(B) * T_ * ROW;
    const I first = I(blockIdx.x) * (BLOCK * WORDS) + threadIdx.x;

    W w[WORDS];
#pragma unroll
    for (int i = 0; i < WORDS; i++) {
        const I at = first + I(i) * BLOCK;
        if (at < n) w[i] = load_word<LOAD>(reinterpret_cast<const W*>(inp) + at);
    }
#pragma unroll
    for (int i = 0; i < WORDS; i++) {
        const I at = first + I(i) * BLOCK;
        if (at >= n) continue;
        const I token = at / ROW;
        const int within = int(at - token * ROW);
        const int h = within / HDV;
        const int d = within - h * HDV;
        const int head = h < NH ? h : NH + (h - NH) * NREP;  // out head of replica 0
        W* to = reinterpret_cast<W*>(out) + token * (3 * NH * HDV) + head * HDV + d;
        if (h < NH) {
            store_word<STORE>(to, w[i]);
        } else {
#pragma unroll
            for (int r = 0; r < NREP; r++) store_word<STORE>(to + r * HDV, w[i]);
        }
    }
}
