// vec: one thread per VEC_BYTES word of dinp (N elements, N even, HD % N == 0, hdv = HD / N words
// a head). idx runs over dinp's words as (tokens, heads_in, hdv): d = idx % hdv, h = (idx / hdv) %
// heads_in, token = idx / (hdv*heads_in). Dinp head h < NH is dout head h; NH + j sums dout heads
// NH + j*nrep + r, r < nrep (common.cuh). The sum is rotated back once (every replica of a
// position shares cos/sin, so the rotation commutes with the sum) for q and k: h < NH + NH_KV.
template <typename T, int VEC_BYTES, int LOAD, int STORE, typename I>
__global__ void repkv_rope_backward_vec(T* dinp, const T* dout, const T* freqs_cis, int B, int T_, int NH,
                                        int NH_KV, int HD) {
    using V = Vec<T, VEC_BYTES>;
    using W = typename V::W;
    const int hdv = HD / V::N;
    const int heads_in = NH + 2 * NH_KV;
    const int nrep = NH / NH_KV;
    const I n = I(B) * T_ * heads_in * hdv;
    const I idx = I(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= n) return;

    const int d = int(idx % hdv);
    const I rest = idx / hdv;
    const int h = int(rest % heads_in);
    const I token = rest / heads_in;
    const int first = h < NH ? h : NH + (h - NH) * nrep;
    const int count = h < NH ? 1 : nrep;
    const W* src = reinterpret_cast<const W*>(dout) + (token * (3 * NH) + first) * hdv + d;
    float acc[V::N] = {};
    for (int r = 0; r < count; r++) V::accumulate(acc, load_word<LOAD>(src + I(r) * hdv));
    if (h < NH + NH_KV) {
        const I t = token % T_;
        rope_rotate<true, T, VEC_BYTES>(acc, reinterpret_cast<const W*>(freqs_cis) + t * hdv + d);
    }
    store_word<STORE>(reinterpret_cast<W*>(dinp) + idx, V::pack(acc));
}
