// split: repkv_backward's split (variants/split.cu) with the rotation: query-copy blocks and K/V
// reduction blocks apart, spread evenly over the grid; HDV (words per head) and NREP compile-time
// constants; every load of a thread issued before its first store. A query word (token, h, d) is
// rotated back alone; a K/V word (token, NH + j, d) sums dout words (token, NH + j*NREP + r, d),
// r < NREP, in float, in groups of at most 8, and is rotated back once if j < NH_KV (k, not v).
// The position is t = token % T_ (one 32-bit division), its freqs_cis word t*HDV + d; each word
// is rounded once. Q runs over (token, h < NH, d < HDV) as off = q % (NH*HDV); K over (token,
// j < 2*NH_KV, d < HDV). A thread takes ITEMS query words or KV_ITEMS = max(1, ITEMS / NREP)
// K/V words, BLOCK apart.
template <typename T, int VEC_BYTES, int HDV, int NREP, int ITEMS, int BLOCK, int LOAD, int STORE, typename I>
__global__ void __launch_bounds__(BLOCK, 1) repkv_rope_backward_split(T* dinp, const T* dout, const T* freqs_cis, int B,
                                                                   int T_, int NH, int NH_KV, int HD) {
    using V = Vec<T, VEC_BYTES>;
    using W = typename V::W;
    constexpr int KV_ITEMS = ITEMS >= NREP ? ITEMS / NREP : 1;
    constexpr int GROUP = NREP < 8 ? NREP : 8;
    const W* src = reinterpret_cast<const W*>(dout);
    const W* freqs = reinterpret_cast<const W*>(freqs_cis);
    W* dst = reinterpret_cast<W*>(dinp);
    const I tokens = I(B) * T_;
    const I heads_in = NH + 2 * NH_KV;
    const I q_row = I(NH) * HDV;  // query words per token
    const I q_words = tokens * q_row;
    const I q_per_block = I(BLOCK) * ITEMS;
    const I q_blocks = (q_words + q_per_block - 1) / q_per_block;

    // Copy blocks are spread evenly over the grid rather than run first: block i copies iff
    // floor((i+1)*q/G) > floor(i*q/G), as copy block floor(i*q/G), else it is reduce block
    // i - floor(i*q/G). So at any moment the GPU both copies (1 read : 1 write) and reduces
    // (NREP reads : 1 write); on an H200 that ran 4-6% faster than all copy blocks first.
    // With i*q = before*G + rem (rem < G), floor((i+1)*q/G) > before iff rem + q >= G: one
    // division, 32-bit wherever G*q fits (a 64-bit one cost small shapes 2-4% on an H200).
    const unsigned long long grid = gridDim.x, blk = blockIdx.x, q = (unsigned long long)q_blocks;
    unsigned long long before, rem;
    if (grid * q <= 0xFFFFFFFFull) {
        const unsigned product = unsigned(blk) * unsigned(q);
        before = product / unsigned(grid);
        rem = product - unsigned(before) * unsigned(grid);
    } else {
        before = blk * q / grid;
        rem = blk * q - before * grid;
    }
    const bool role_q = rem + q >= grid;
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

    const I kv_row = I(2) * NH_KV * HDV;  // K and V words per token of dinp
    const I kv_words = tokens * kv_row;
    const I base = index * BLOCK * KV_ITEMS + threadIdx.x;
    float acc[KV_ITEMS][V::N] = {};
    I to[KV_ITEMS], token[KV_ITEMS];
    int jd[KV_ITEMS][2];  // (j, d) of each output word
#pragma unroll
    for (int r0 = 0; r0 < NREP; r0 += GROUP) {
        W w[KV_ITEMS][GROUP];
#pragma unroll
        for (int i = 0; i < KV_ITEMS; i++) {
            const I k = base + I(i) * BLOCK;
            if (k < kv_words) {
                token[i] = k / kv_row;
                const I rem = k - token[i] * kv_row;  // (j, d) within the token
                const I j = rem / HDV;
                const I d = rem - j * HDV;
                jd[i][0] = int(j);
                jd[i][1] = int(d);
                const W* s = src + (token[i] * 3 * NH + NH + j * NREP + r0) * HDV + d;
#pragma unroll
                for (int r = 0; r < GROUP; r++) {
                    if (r0 + r < NREP) w[i][r] = load_word<LOAD>(s + r * HDV);
                }
                to[i] = (token[i] * heads_in + NH) * HDV + rem;
            }
        }
#pragma unroll
        for (int i = 0; i < KV_ITEMS; i++) {
#pragma unroll
            for (int r = 0; r < GROUP; r++) {
                if (r0 + r < NREP && base + I(i) * BLOCK < kv_words) V::accumulate(acc[i], w[i][r]);
            }
        }
    }
#pragma unroll
    for (int i = 0; i < KV_ITEMS; i++) {
        if (base + I(i) * BLOCK < kv_words && jd[i][0] < NH_KV) {
            const int t = int(token[i]) % T_;
            rope_rotate<true, T, VEC_BYTES>(acc[i], freqs + t * HDV + jd[i][1]);
        }
    }
#pragma unroll
    for (int i = 0; i < KV_ITEMS; i++) {
        if (base + I(i) * BLOCK < kv_words) store_word<STORE>(dst + to[i], V::pack(acc[i]));
    }
}
