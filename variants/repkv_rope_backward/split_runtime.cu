// split_runtime: this op's split (split.cu) with the head layout read at run time, as
// repkv_backward's split_runtime (variants/split_runtime.cu): one instantiation serves every
// (NH, NH_KV, HD), so the exported header launches it for layouts nobody tuned.
//
// hdv = HD / N words per head, nrep = NH / NH_KV, both run-time values. Copy blocks: q runs over
// (token, h < NH, d < hdv), ITEMS words blockDim.x apart a thread, each rotated back alone. Reduce
// blocks: k over (token, j < 2*NH_KV, d < hdv), KV_ITEMS dinp words blockDim.x apart a thread,
// each the sum of dout words (token, NH + j*nrep + r, d), r < nrep, loaded GROUP replicas of
// every word at a time (predicated) and summed in float, then rotated back once if j < NH_KV
// (k, not v), and rounded once. The position is t = token % T_, its freqs_cis word t*hdv + d.
// A run-time division costs some twenty instructions, and a 16-bit word's rotation keeps the
// issue slots busy, so a thread divides only for its first word, (token, h, d, t) =
// (base / (heads*hdv), ..., token % T_), and for the step blockDim.x = (st, sh, sd) in
// (token, head, word): each later word adds the step with one carry from d into the head and
// one from the head into the token (d + sd < 2*hdv, h + sh + 1 < 2*heads), and t wraps by a
// division only when it passes T_ (`SplitRuntimeWalk`). At small nrep a reduce thread of one word has little
// to do beside that set-up; KV_ITEMS > 1 shares it (the compiled `split` gives ITEMS / NREP).
// Grid: ceil(tokens*NH*hdv / (blockDim.x*ITEMS)) copy blocks + ceil(tokens*2*NH_KV*hdv /
// (blockDim.x*KV_ITEMS)) reduce blocks, spread as split.cu spreads them.
template <typename I>
struct SplitRuntimeWalk {
    I token;
    int h, d, t;
    int st, sh, sd;  // the step, blockDim.x words, in (token, head, word)
    int heads, hdv, T_;

    __device__ __forceinline__ SplitRuntimeWalk(I first, int heads_, int hdv_, int T, int step) : heads(heads_), hdv(hdv_), T_(T) {
        const I unit = first / hdv;  // (token, head)
        d = int(first - unit * hdv);
        const I tk = unit / heads;
        h = int(unit - tk * heads);
        token = tk;
        t = int(tk % T);
        const int step_units = step / hdv;
        sd = step - step_units * hdv;
        st = step_units / heads;
        sh = step_units - st * heads;
    }

    __device__ __forceinline__ void next() {
        d += sd;
        const int carry_d = d >= hdv;
        d -= carry_d ? hdv : 0;
        h += sh + carry_d;
        const int carry_h = h >= heads;
        h -= carry_h ? heads : 0;
        token += st + carry_h;
        t += st + carry_h;
        if (t >= T_) t %= T_;
    }
};

template <typename T, int VEC_BYTES, int ITEMS, int GROUP, int KV_ITEMS, int LOAD, int STORE, typename I>
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
        SplitRuntimeWalk<I> at(base, NH, hdv, T_, int(block));
        W w[ITEMS];
        I to[ITEMS];
        int f[ITEMS];  // the freqs_cis word of each
#pragma unroll
        for (int i = 0; i < ITEMS; i++) {
            if (i > 0) at.next();
            if (base + I(i) * block < q_words) {
                const I token = at.token;
                const int off = at.h * hdv + at.d;
                w[i] = load_word<LOAD>(src + token * 3 * q_row + off);
                to[i] = token * heads_in * hdv + off;
                f[i] = at.t * hdv + at.d;
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

    const I kv_words = tokens * 2 * NH_KV * hdv;
    const I base = index * block * KV_ITEMS + threadIdx.x;
    if (base >= kv_words) return;
    SplitRuntimeWalk<I> at(base, 2 * NH_KV, hdv, T_, int(block));
    const W* s[KV_ITEMS];
    I to[KV_ITEMS];
    int f[KV_ITEMS];  // the freqs_cis word of each; -1 for a V word (not rotated)
    bool live[KV_ITEMS];
#pragma unroll
    for (int i = 0; i < KV_ITEMS; i++) {
        if (i > 0) at.next();
        const I token = at.token;
        live[i] = base + I(i) * block < kv_words;
        s[i] = src + (token * 3 * NH + NH + I(at.h) * nrep) * hdv + at.d;
        to[i] = (token * heads_in + NH + at.h) * hdv + at.d;
        f[i] = at.h < NH_KV ? at.t * hdv + at.d : -1;
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
        if (live[i]) {
            if (f[i] >= 0) rope_rotate<true, T, VEC_BYTES>(acc[i], freqs + f[i]);
            store_word<STORE>(dst + to[i], V::pack(acc[i]));
        }
    }
}
