// tile: Triton's layout in CUDA. A block writes a tile of BT tokens of one dinp head. With
// HEAD_FASTEST 0 (as Triton's grid) blocks run over (head, tile) with the tile fastest, so
// neighbouring blocks read one head of neighbouring tokens; with 1 over (tile, head) with the
// head fastest, so neighbouring blocks read neighbouring heads of the same tokens (contiguous
// rows of dout and dinp). Word w < BT*HDV of a tile is word w % HDV of token w / HDV (coalesced
// per warp). HDV, NREP, BT and BLOCK are compile-time, so the block's (head, tile) is the only
// runtime division: no per-element index math, which is what short kernels pay for on small
// shapes. Query heads copy their words; K/V head NH + j sums dout heads NH + j*NREP + r,
// r < NREP (see common.cuh), in groups of at most 8 replicas, a group's loads before its adds.
// HEADS_C > 0 compiles the head layout in (HEADS_C = NH + 2*NH_KV, so NH_KV = HEADS_C / (NREP+2)):
// the head-fastest block's division becomes a multiply, and the row strides immediates; the
// NH and NH_KV arguments are then not read.
template <typename T, int VEC_BYTES, int HDV, int NREP, int BT, int BLOCK, int HEAD_FASTEST, int LOAD, int STORE, int HEADS_C, typename I>
__global__ void __launch_bounds__(BLOCK, 1) repkv_tile(T* dinp, const T* dout, int B, int T_, int NH_arg, int NH_KV_arg, int HD) {
    using V = Vec<T, VEC_BYTES>;
    using W = typename V::W;
    constexpr int WORDS = BT * HDV;  // words per tile
    constexpr int PER = (WORDS + BLOCK - 1) / BLOCK;  // words per thread
    constexpr int GROUP = NREP < 8 ? NREP : 8;
    const W* src = reinterpret_cast<const W*>(dout);
    W* dst = reinterpret_cast<W*>(dinp);
    const int NH_KV = HEADS_C > 0 ? HEADS_C / (NREP + 2) : NH_KV_arg;
    const int NH = HEADS_C > 0 ? NH_KV * NREP : NH_arg;
    const I tokens = I(B) * T_;
    const I heads_in = NH + 2 * NH_KV;
    int head;
    I t0;
    if constexpr (HEAD_FASTEST) {
        const unsigned tile = blockIdx.x / unsigned(heads_in);
        head = int(blockIdx.x - tile * unsigned(heads_in));
        t0 = I(tile) * BT;
    } else {
        const unsigned tiles = unsigned((tokens + BT - 1) / BT);
        head = int(blockIdx.x / tiles);
        t0 = I(blockIdx.x - unsigned(head) * tiles) * BT;
    }

    // Word i of this thread: word d[i] of the head at token t[i], written where live[i].
    I t[PER];
    int d[PER];
    bool live[PER];
#pragma unroll
    for (int i = 0; i < PER; i++) {
        const int w = threadIdx.x + i * BLOCK;
        t[i] = t0 + w / HDV;
        d[i] = w % HDV;
        live[i] = (WORDS % BLOCK == 0 || w < WORDS) && t[i] < tokens;
    }

    if (head < NH) {
        W w[PER];
#pragma unroll
        for (int i = 0; i < PER; i++) {
            if (live[i]) w[i] = load_word<LOAD>(src + (t[i] * 3 * NH + head) * HDV + d[i]);
        }
#pragma unroll
        for (int i = 0; i < PER; i++) {
            if (live[i]) store_word<STORE>(dst + (t[i] * heads_in + head) * HDV + d[i], w[i]);
        }
        return;
    }

    const int kv = head - NH;  // < NH_KV: key head kv, else value head kv - NH_KV
    const int which = kv >= NH_KV;
    const int first = (1 + which) * NH + (kv - which * NH_KV) * NREP;  // dout head of replica 0
    float acc[PER][V::N] = {};
#pragma unroll
    for (int r0 = 0; r0 < NREP; r0 += GROUP) {
        W w[PER][GROUP];
#pragma unroll
        for (int i = 0; i < PER; i++) {
            if (live[i]) {
                const W* s = src + (t[i] * 3 * NH + first + r0) * HDV + d[i];
#pragma unroll
                for (int r = 0; r < GROUP; r++) {
                    if (r0 + r < NREP) w[i][r] = load_word<LOAD>(s + r * HDV);
                }
            }
        }
#pragma unroll
        for (int i = 0; i < PER; i++) {
#pragma unroll
            for (int r = 0; r < GROUP; r++) {
                if (live[i] && r0 + r < NREP) V::accumulate(acc[i], w[i][r]);
            }
        }
    }
#pragma unroll
    for (int i = 0; i < PER; i++) {
        if (live[i]) store_word<STORE>(dst + (t[i] * heads_in + head) * HDV + d[i], V::pack(acc[i]));
    }
}
