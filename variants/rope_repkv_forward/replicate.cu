// replicate: one thread per VEC_BYTES word of inp (N elements, N even, hdv = HD / N words a head).
// idx runs over inp's words as (tokens, heads_in, hdv): d = idx % hdv, h = (idx / hdv) % heads_in,
// token = idx / (hdv*heads_in). Inp head h < NH is out head h; inp head NH + j (j < 2*NH_KV: K
// then V heads) is out heads NH + j*nrep + r, r < nrep (V head g = j - NH_KV lands at 2*NH +
// g*nrep + r = NH + j*nrep + r since NH = NH_KV*nrep). q and k (h < NH + NH_KV) are rotated once.
template <typename T, int VEC_BYTES, int LOAD, int STORE, typename I>
__global__ void rope_repkv_forward_replicate(T* out, const T* inp, const T* freqs_cis, int B, int T_, int NH,
                                             int NH_KV, int HD) {
    using W = typename Vec<T, VEC_BYTES>::W;
    const int hdv = HD / Vec<T, VEC_BYTES>::N;
    const int heads_in = NH + 2 * NH_KV;
    const int nrep = NH / NH_KV;
    const I n = I(B) * T_ * heads_in * hdv;
    const I idx = I(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= n) return;

    const int d = int(idx % hdv);
    const I rest = idx / hdv;
    const int h = int(rest % heads_in);
    const I token = rest / heads_in;
    W w = load_word<LOAD>(reinterpret_cast<const W*>(inp) + idx);
    if (h < NH + NH_KV) {
        const I t = token % T_;
        w = rope_word<false, T, VEC_BYTES>(w, reinterpret_cast<const W*>(freqs_cis) + t * hdv + d);
    }
    const int first = h < NH ? h : NH + (h - NH) * nrep;
    const int copies = h < NH ? 1 : nrep;
    W* to = reinterpret_cast<W*>(out) + (token * (3 * NH) + first) * hdv + d;
    for (int r = 0; r < copies; r++) store_word<STORE>(to + I(r) * hdv, w);
}
