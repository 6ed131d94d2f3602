// vec: one thread per VEC_BYTES word of out (N elements, N even, HD % N == 0, hdv = HD / N words
// a head). idx runs over out's words as (tokens, 3*NH, hdv): d = idx % hdv, h = (idx / hdv) % 3NH,
// token = idx / (hdv*3NH); c = h / NH (q, k, v), r = h % NH reads inp head r (q), NH + r/nrep (k)
// or NH + NH_KV + r/nrep (v). q and k words are rotated with freqs word (token % T)*hdv + d.
template <typename T, int VEC_BYTES, int LOAD, int STORE, typename I>
__global__ void rope_repkv_forward_vec(T* out, const T* inp, const T* freqs_cis, int B, int T_, int NH, int NH_KV,
                                       int HD) {
    using W = typename Vec<T, VEC_BYTES>::W;
    const int hdv = HD / Vec<T, VEC_BYTES>::N;
    const int heads_in = NH + 2 * NH_KV;
    const int heads_out = 3 * NH;
    const int nrep = NH / NH_KV;
    const I n = I(B) * T_ * heads_out * hdv;
    const I idx = I(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= n) return;

    const int d = int(idx % hdv);
    const I rest = idx / hdv;
    const int h = int(rest % heads_out);
    const I token = rest / heads_out;
    const int c = h / NH;
    const int r = h - c * NH;
    const int src = c == 0 ? r : NH + (c - 1) * NH_KV + r / nrep;
    W w = load_word<LOAD>(reinterpret_cast<const W*>(inp) + (token * heads_in + src) * hdv + d);
    if (c < 2) {
        const I t = token % T_;
        w = rope_word<false, T, VEC_BYTES>(w, reinterpret_cast<const W*>(freqs_cis) + t * hdv + d);
    }
    store_word<STORE>(reinterpret_cast<W*>(out) + idx, w);
}
