// gather: one thread per dinp element (llm.c's later kernel2 idea), scalar loads and stores.
// idx runs over dinp as (tokens, heads_in, HD): d = idx % HD, h = (idx / HD) % heads_in,
// token = idx / (HD * heads_in). The token's dout row starts at token * 3*NH*HD; see common.cuh
// for why dinp head NH + j sums dout heads NH + j*nrep + r. I is int where every index fits.
template <typename T, int LOAD, int STORE, typename I>
__global__ void repkv_gather(T* dinp, const T* dout, int B, int T_, int NH, int NH_KV, int HD) {
    using V = Vec<T, int(sizeof(T))>;
    using W = typename V::W;
    const int heads_in = NH + 2 * NH_KV;
    const int nrep = NH / NH_KV;
    const I n = I(B) * T_ * heads_in * HD;
    const I idx = I(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= n) return;

    const int d = int(idx % HD);
    const I rest = idx / HD;
    const int h = int(rest % heads_in);
    const I token = rest / heads_in;
    const W* src = reinterpret_cast<const W*>(dout) + token * (3 * NH) * HD + d;  // head 0, column d
    W* dst = reinterpret_cast<W*>(dinp) + idx;

    if (h < NH) {
        store_word<STORE>(dst, load_word<LOAD>(src + I(h) * HD));
    } else {
        src += I(NH + (h - NH) * nrep) * HD;  // first replica of K/V head j = h - NH
        float acc[1] = {0.0f};
        for (int r = 0; r < nrep; r++) V::accumulate(acc, load_word<LOAD>(src + I(r) * HD));
        store_word<STORE>(dst, V::pack(acc));
    }
}
