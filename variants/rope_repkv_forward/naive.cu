// naive: llm.c's repkv_forward_kernel1 then rope_forward_kernel1, one thread per out element,
// decoded from idx over (B, N, 3, NH, HD) with int indices as llm.c. Out head (c, nh) reads inp
// head nh (c = 0, q), NH + nh/nrep (c = 1, k) or NH + NH_KV + nh/nrep (c = 2, v). q and k
// elements read their pair (d0, d0 + 1), d0 = d & ~1, and freqs_cis[n, d0 .. d0 + 1], and keep
// the half of the rotation that is theirs; v is copied.
template <typename floatX>
__global__ void rope_repkv_forward_naive(floatX* out, const floatX* inp, const floatX* freqs_cis, int B, int N,
                                         int NH, int NH_KV, int HD) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * N * 3 * NH * HD) { return; }
    int out_idx = idx;

    int d = idx % HD;
    idx /= HD;
    int nh = idx % NH;
    idx /= NH;
    int c = idx % 3;
    idx /= 3;
    int n = idx % N;
    int b = idx / N;

    int replicate_factor = NH / NH_KV;
    int nh_total = NH + 2 * NH_KV;
    int inp_head = c == 0 ? nh : NH + (c - 1) * NH_KV + nh / replicate_factor;
    int inp_idx = (b * N + n) * nh_total * HD + inp_head * HD;
    if (c == 2) {
        out[out_idx] = inp[inp_idx + d];
        return;
    }
    int d0 = d & ~1;
    float freqs_cos = to_float(freqs_cis[n * HD + d0]);
    float freqs_sin = to_float(freqs_cis[n * HD + d0 + 1]);
    float x_real = to_float(inp[inp_idx + d0]);
    float x_imag = to_float(inp[inp_idx + d0 + 1]);
    float o = (d & 1) ? x_real * freqs_sin + x_imag * freqs_cos : x_real * freqs_cos - x_imag * freqs_sin;
    out[out_idx] = from_float<floatX>(o);
}
