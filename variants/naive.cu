// naive: llm.c's repkv_backward_kernel1, reproduced faithfully as the baseline.
// One thread per dout element, decoded from the flat index idx over (B, N, 3, NH, HD) with
// int arithmetic (so the whole of dout must stay below 2^31 elements). A query thread (c == 0)
// copies its element to the same (b, n, nh, d) of dinp. Of the nrep K (or V) threads that map
// to one dinp element only the first replica (nh % nrep == 0) works: it reads the nrep
// replicas, HD apart, and writes their sum; the other nrep - 1 threads stay idle.
template <typename floatX>
__global__ void repkv_naive(floatX* dinp, const floatX* dout, int B, int N, int NH, int NH_KV, int HD) {
    int replicate_factor = NH / NH_KV;
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * N * 3 * NH * HD) { return; }
    int dout_idx = idx;  // keep backup

    // decode the dout index
    int d = idx % HD;
    idx /= HD;
    int nh = idx % NH;
    idx /= NH;
    int c = idx % 3;
    idx /= 3;
    int n = idx % N;
    int b = idx / N;

    int dinp_idx;
    int nh_total = NH + 2 * (NH / replicate_factor);

    if (c == 0) {
        dinp_idx = b * N * nh_total * HD + n * nh_total * HD + 0 * NH * HD + nh * HD + d;
        dinp[dinp_idx] = __ldcs(&dout[dout_idx]);
    } else if (c == 1) {
        if (nh % replicate_factor == 0) {
            float reduced_sum = 0.0f;
            for (int i = 0; i < replicate_factor; i++) {
                reduced_sum += to_float(__ldcs(&dout[dout_idx + HD * i]));
            }
            dinp_idx = b * N * nh_total * HD + n * nh_total * HD + 1 * NH * HD + (nh / replicate_factor) * HD + d;
            dinp[dinp_idx] = from_float<floatX>(reduced_sum);
        }
    } else {
        if (nh % replicate_factor == 0) {
            float reduced_sum = 0.0f;
            for (int i = 0; i < replicate_factor; i++) {
                reduced_sum += to_float(__ldcs(&dout[dout_idx + HD * i]));
            }
            dinp_idx = b * N * nh_total * HD + n * nh_total * HD + (NH * HD + (NH / replicate_factor) * HD)
                       + (nh / replicate_factor) * HD + d;
            dinp[dinp_idx] = from_float<floatX>(reduced_sum);
        }
    }
}
