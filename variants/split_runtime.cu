// split_runtime: split's two roles (query copy blocks and K/V reduction blocks, spread evenly
// over the grid) with the head layout read at run time, so that one instantiation serves every
// (NH, NH_KV, HD): the exported header launches it for layouts nobody tuned.
//
// hdv = HD / N words per head, nrep = NH / NH_KV, both run-time values.
// Copy blocks (the first role): q runs over (token, h < NH, d < hdv); the query word sits at the
// same offset off = q % (NH*hdv) of the token's dout row (3*NH*hdv words) and dinp row
// (heads_in*hdv words). Each thread moves ITEMS words blockDim.x apart, all loads before the
// first store.
// Reduce blocks: KV_ITEMS dinp words blockDim.x apart a thread, k over (token, j < 2*NH_KV,
// d < hdv); dinp word (token, NH + j, d) sums dout words (token, NH + j*nrep + r, d), r < nrep
// (common.cuh). The replicas of every word are loaded GROUP at a time (a predicated, unrolled
// group), so KV_ITEMS*GROUP loads are in flight whatever nrep is, and summed in float in the
// order r = 0, 1, ... At small nrep a thread of one word has little to do beside its index
// math; KV_ITEMS > 1 shares it (the compiled `split` gives a thread ITEMS / NREP outputs).
// Grid: ceil(tokens*NH*hdv / (blockDim.x*ITEMS)) copy blocks + ceil(tokens*2*NH_KV*hdv /
// (blockDim.x*KV_ITEMS)) reduce blocks. __launch_bounds__(256): the largest block launched (at
// 512, 128 registers a thread spilled with 8-byte half-precision words, 8 items and 64-bit
// indices).
template <typename T, int VEC_BYTES, int ITEMS, int GROUP, int KV_ITEMS, int LOAD, int STORE, typename I>
__global__ void __launch_bounds__(256, 1) repkv_split_runtime(T* dinp, const T* dout, int B, int T_, int NH, int NH_KV, int HD) {
    using V = Vec<T, VEC_BYTES>;
    using W = typename V::W;
    const W* src = reinterpret_cast<const W*>(dout);
    W* dst = reinterpret_cast<W*>(dinp);
    const int hdv = HD / V::N;
    const int nrep = NH / NH_KV;
    const I block = blockDim.x;
    const I tokens = I(B) * T_;
    const I heads_in = NH + 2 * NH_KV;
    const I q_row = I(NH) * hdv;  // query words per token
    const I q_words = tokens * q_row;
    const I q_per_block = block * ITEMS;
    const I q_blocks = (q_words + q_per_block - 1) / q_per_block;

    // Block i copies iff floor((i+1)*q/G) > floor(i*q/G), as copy block floor(i*q/G), else it is
    // reduce block i - floor(i*q/G) (split.cu says why, and how one division decides it).
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
        // One division of index type I for the first word; the others are i*blockDim.x words on,
        // within q_row + ITEMS*blockDim.x of the first token's start: 32-bit divisions.
        const I base = index * q_per_block + threadIdx.x;
        const I token0 = base / q_row;
        const int off0 = int(base - token0 * q_row);
        W w[ITEMS];
        I to[ITEMS];
#pragma unroll
        for (int i = 0; i < ITEMS; i++) {
            if (base + I(i) * block < q_words) {
                const int ahead = off0 + i * int(block);
                const int step = ahead / int(q_row);
                const I token = token0 + step;
                const int off = ahead - step * int(q_row);
                w[i] = load_word<LOAD>(src + token * 3 * q_row + off);
                to[i] = token * heads_in * hdv + off;
            }
        }
#pragma unroll
        for (int i = 0; i < ITEMS; i++) {
            if (base + I(i) * block < q_words) store_word<STORE>(dst + to[i], w[i]);
        }
        return;
    }

    const I kv_row = I(2) * NH_KV * hdv;  // K and V words per token of dinp
    const I kv_words = tokens * kv_row;
    const I base = index * block * KV_ITEMS + threadIdx.x;
    if (base >= kv_words) return;
    // As the copy thread: one division of type I for the first word, 32-bit ones for the others.
    const I token0 = base / kv_row;
    const int rest0 = int(base - token0 * kv_row);
    const W* s[KV_ITEMS];
    I to[KV_ITEMS];
    bool live[KV_ITEMS];
#pragma unroll
    for (int i = 0; i < KV_ITEMS; i++) {
        const int ahead = rest0 + i * int(block);
        const int step = ahead / int(kv_row);
        const I token = token0 + step;
        const int rest = ahead - step * int(kv_row);  // (j, d) within the token
        const int j = rest / hdv;
        const int d = rest - j * hdv;
        live[i] = base + I(i) * block < kv_words;
        s[i] = src + (token * 3 * NH + NH + I(j) * nrep) * hdv + d;
        to[i] = (token * heads_in + NH) * hdv + rest;
    }
    float acc[KV_ITEMS][V::N] = {};
    for (int r0 = 0; r0 < nrep; r0 += GROUP) {
        W w[KV_ITEMS][GROUP];
#pragma unroll
        for (int i = 0; i < KV_ITEMS; i++) {
#pragma unroll
            for (int r = 0; r < GROUP; r++) {
                if (live[i] && r0 + r < nrep) w[i][r] = load_word<LOAD>(s[i] + I(r0 + r) * hdv);
            }
        }
#pragma unroll
        for (int i = 0; i < KV_ITEMS; i++) {
#pragma unroll
            for (int r = 0; r < GROUP; r++) {
                if (live[i] && r0 + r < nrep) V::accumulate(acc[i], w[i][r]);
            }
        }
    }
#pragma unroll
    for (int i = 0; i < KV_ITEMS; i++) {
        if (live[i]) store_word<STORE>(dst + to[i], V::pack(acc[i]));
    }
}
