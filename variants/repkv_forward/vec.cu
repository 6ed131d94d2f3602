// vec: one thread per VEC_BYTES-wide word of out (16 bytes = float4 or 8 halves), a gather.
// With hdv = HD / N words per head, idx runs over out's words as (tokens, 3*NH, hdv):
// d = idx % hdv, h = (idx / hdv) % (3*NH), token = idx / (hdv * 3*NH). Out head h < NH reads
// query head h; out head NH + k (k < 2*NH), K replica k for k < NH and V replica k - NH after,
// reads inp head NH + k / nrep: K head k / nrep, or V head NH_KV + (k - NH) / nrep since NH / nrep
// = NH_KV. HD % N == 0 and cudaMalloc's 256-byte alignment keep every word aligned.
template <typename T, int VEC_BYTES, int LOAD, int STORE, typename I>
__global__ void repkv_forward_vec(T* out, const T* inp, int B, int T_, int NH, int NH_KV, int HD) {
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
    const int src = h < NH ? h : NH + (h - NH) / nrep;
    const W* from = reinterpret_cast<const W*>(inp) + (token * heads_in + src) * hdv + d;
    store_word<STORE>(reinterpret_cast<W*>(out) + idx, load_word<LOAD>(from));
}
