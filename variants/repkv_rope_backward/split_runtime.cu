// split_runtime: this op's split (split.cu) with the head layout read at run time, as
// repkv_backward's split_runtime (variants/split_runtime.cu): one instantiation serves every
// (NH, NH_KV, HD), so the exported header launches it for layouts nobody tuned.
//
// hdv = HD / N words per head, nrep = NH / NH_KV, both run-time values. Copy blocks: q runs over
// (token, h < NH, d < hdv), ITEMS words blockDim.x apart a thread, each rotated back alone. Reduce
// blocks: one dinp word a thread, k over (token, j < 2*NH_KV, d < hdv), the sum of dout words
// (token, NH + j*nrep + r, d), r < nrep, loaded GROUP at a time (predicated) and summed in float,
// then rotated back once if j < NH_KV (k, not v), and rounded once. The position is t = token % T_,
// its freqs_cis word t*hdv + d.
// A run-time division costs some twenty instructions, and a 16-bit word's rotation keeps the
// issue slots busy, so a copy thread divides only for its first word, (token, h, d, t) =
// (base / (NH*hdv), ..., token % T_), and for the step blockDim.x = (st, sh, sd) in
// (token, head, word): each later word adds the step with one carry from d into h and one from
// h into the token (d + sd < 2*hdv, h + sh + 1 < 2*NH), and t wraps by a division only when it
// passes T_.
// Grid: ceil(tokens*NH*hdv / (blockDim.x*ITEMS)) copy blocks + ceil(tokens*2*NH_KV*hdv / blockDim.x)
// reduce blocks, spread as split.cu spreads them.
template <typename T, int VEC_BYTES, int ITEMS, int GROUP, int LOAD, int STORE, typename I>
__global__ void __launch_bounds__(256, 1) repkv_rope_backward_split_runtime(T* dinp, const T* dout, const T* freqs_cis,
                                                                         int B, int T_, int NH, int NH_KV, int HD) {
    using V = Vec<T, VEC_BYTES>;
    using W = typename V::W;
    const W* src = reinterpret_cast<const W*>(dout);
    const W* freqs = reinterpret_cast<const W*>(freqs_cis);
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
        const I unit = base / hdv;  // (token, h)
        int d = int(base - unit * hdv);
        I token = unit / NH;
        int h = int(unit - token * NH);
        int t = int(token % T_);
        const int step_units = int(block) / hdv;
        const int sd = int(block) - step_units * hdv;
        const int st = step_units / NH;
        const int sh = step_units - st * NH;
        W w[ITEMS];
        I to[ITEMS];
        int f[ITEMS];  // the freqs_cis word of each
#pragma unroll
        for (int i = 0; i < ITEMS; i++) {
            if (i > 0) {
                d += sd;
                const int carry_d = d >= hdv;
                d -= carry_d ? hdv : 0;
                h += sh + carry_d;
                const int carry_h = h >= NH;
                h -= carry_h ? NH : 0;
                token += st + carry_h;
                t += st + carry_h;
                if (t >= T_) t %= T_;
            }
            if (base + I(i) * block < q_words) {
                const int off = h * hdv + d;
                w[i] = load_word<LOAD>(src + token * 3 * q_row + off);
                to[i] = token * heads_in * hdv + off;
                f[i] = t * hdv + d;
            }
        }
#pragma unroll
        for (int i = 0; i < ITEMS; i++) {
            if (base + I(i) * block < q_words) {
                store_word<STORE>(dst + to[i], rope_word<true, T, VEC_BYTES>(w[i], freqs + f[i]));
            }
        }
        return;
    }

    const I kv_row = I(2) * NH_KV * hdv;  // K and V words per token of dinp
    const I k = index * block + threadIdx.x;
    if (k >= tokens * kv_row) return;
    const I token = k / kv_row;
    const int rest = int(k - token * kv_row);  // (j, d) within the token
    const int j = rest / hdv;
    const int d = rest - j * hdv;
    const W* s = src + (token * 3 * NH + NH + I(j) * nrep) * hdv + d;
    float acc[V::N] = {};
    for (int r0 = 0; r0 < nrep; r0 += GROUP) {
        W w[GROUP];
#pragma unroll
        for (int r = 0; r < GROUP; r++) {
            if (r0 + r < nrep) w[r] = load_word<LOAD>(s + I(r0 + r) * hdv);
        }
#pragma unroll
        for (int r = 0; r < GROUP; r++) {
            if (r0 + r < nrep) V::accumulate(acc, w[r]);
        }
    }
    if (j < NH_KV) rope_rotate<true, T, VEC_BYTES>(acc, freqs + int(token % T_) * hdv + d);
    store_word<STORE>(dst + (token * heads_in + NH) * hdv + rest, V::pack(acc));
}
