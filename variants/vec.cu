// vec: one thread per VEC_BYTES-wide word of dinp (16 bytes = float4 or 8 halves), a gather.
// With hdv = HD / N words per head (N elements per word), idx runs over dinp's words as
// (tokens, heads_in, hdv): d = idx % hdv, h = (idx / hdv) % heads_in, token = idx / (hdv*heads_in).
// HD % N == 0 and cudaMalloc's 256-byte alignment keep every word aligned.
template <typename T, int VEC_BYTES, int LOAD, int STORE, typename I>
__global__ void repkv_vec(T* dinp, const T* dout, int B, int T_, int NH, int NH_KV, int HD) {
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
    const W* src = reinterpret_cast<const W*>(dout) + token * (3 * NH) * hdv + d;
    W* dst = reinterpret_cast<W*>(dinp) + idx;

    if (h < NH) {
        store_word<STORE>(dst, load_word<LOAD>(src + I(h) * hdv));
    } else {
        src += I(NH + (h - NH) * nrep) * hdv;
        float acc[V::N] = {};
        for (int r = 0; r < nrep; r++) V::accumulate(acc, load_word<LOAD>(src + I(r) * hdv));
        store_word<STORE>(dst, V::pack(acc));
    }
}
