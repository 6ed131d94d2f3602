// warp_per_head: one warp per (token, dinp head). warp = global warp index over
// (tokens, heads_in): h = warp % heads_in, token = warp / heads_in. Lane l handles words
// l, l+32, ... of the head's hdv = HD / N words, so a warp reads whole 32-word runs; a K/V warp
// loops over the nrep replicas (HD apart) for each of its words and writes one sum.
template <typename T, int VEC_BYTES, int LOAD, int STORE, typename I>
__global__ void repkv_warp_per_head(T* dinp, const T* dout, int B, int T_, int NH, int NH_KV, int HD) {
    using V = Vec<T, VEC_BYTES>;
    using W = typename V::W;
    const int hdv = HD / V::N;
    const int heads_in = NH + 2 * NH_KV;
    const int nrep = NH / NH_KV;
    const I warp = I(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (warp >= I(B) * T_ * heads_in) return;

    const int h = int(warp % heads_in);
    const I token = warp / heads_in;
    const W* src = reinterpret_cast<const W*>(dout) + token * (3 * NH) * hdv;
    W* dst = reinterpret_cast<W*>(dinp) + warp * hdv;

    if (h < NH) {
        src += I(h) * hdv;
        for (int c = lane; c < hdv; c += 32) store_word<STORE>(dst + c, load_word<LOAD>(src + c));
    } else {
        src += I(NH + (h - NH) * nrep) * hdv;
        for (int c = lane; c < hdv; c += 32) {
            float acc[V::N] = {};
            for (int r = 0; r < nrep; r++) V::accumulate(acc, load_word<LOAD>(src + I(r) * hdv + c));
            store_word<STORE>(dst + c, V::pack(acc));
        }
    }
}
