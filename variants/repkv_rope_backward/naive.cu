// naive: llm.c's rope_backward_inplace_kernel1 then repkv_backward_kernel1, one thread per dinp
// element, decoded from idx over (B, N, NH + 2*NH_KV, HD) with int indices as llm.c. Dinp head
// h < NH is dout head h (q); dinp head NH + j (j < 2*NH_KV: K then V heads) sums dout heads
// NH + j*nrep + i, i < nrep (the flat (3, NH) head index, as in common.cuh). q and k elements
// rotate each replica's pair (d0, d0 + 1), d0 = d & ~1, back in float, keep their half, and sum.
template <typename floatX>
__global__ void repkv_rope_backward_naive(floatX* dinp, const floatX* dout, const floatX* freqs_cis, int B, int N,
                                          int NH, int NH_KV, int HD) {
    int nh_total = NH + 2 * NH_KV;
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * N * nh_total * HD) { return; }
    int dinp_idx = idx;

    int d = idx % HD;
    idx /= HD;
    int h = idx % nh_total;
    idx /= nh_total;
    int n = idx % N;
    int b = idx / N;

    int replicate_factor = NH / NH_KV;
    int first = h < NH ? h : NH + (h - NH) * replicate_factor;
    int count = h < NH ? 1 : replicate_factor;
    const floatX* src = dout + (b * N + n) * 3 * NH * HD + first * HD;
    float reduced_sum = 0.0f;
    if (h >= NH + NH_KV) {
        for (int i = 0; i < count; i++) reduced_sum += to_float(src[i * HD + d]);
    } else {
        int d0 = d & ~1;
        float freqs_cos = to_float(freqs_cis[n * HD + d0]);
        float freqs_sin = to_float(freqs_cis[n * HD + d0 + 1]);
        for (int i = 0; i < count; i++) {
            float dout_real = to_float(src[i * HD + d0]);
            float dout_imag = to_float(src[i * HD + d0 + 1]);
            reduced_sum += (d & 1) ? -dout_real * freqs_sin + dout_imag * freqs_cos
                                   : dout_real * freqs_cos + dout_imag * freqs_sin;
        }
    }
    dinp[dinp_idx] = from_float<floatX>(reduced_sum);
}
