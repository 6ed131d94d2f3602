// naive: llm.c's repkv_forward_kernel1, reproduced faithfully as the baseline.
// One thread per out element, decoded from the flat index idx over (B, N, 3, NH, HD) with int
// arithmetic (so the whole of out must stay below 2^31 elements). The thread copies
// inp[b, n, src, d] with one __ldcs and a plain store, where src = nh for a query (c == 0),
// NH + nh / nrep for K (c == 1) and NH + NH_KV + nh / nrep for V (c == 2). llm.c passes
// replicate_factor; the shared signature passes NH_KV, so it is derived here.
// (llm.c's launcher does a cudaMemcpy instead when nrep == 1; this kernel serves that case too.)
template <typename floatX>
__global__ void repkv_forward_naive(floatX* replicated_qkv, const floatX* gqa_qkv, int B, int N, int NH, int NH_KV,
                                    int HD) {
    int replicate_factor = NH / NH_KV;
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * N * 3 * NH * HD) { return; }
    int idx_flat = idx;  // keep backup

    // decode the output index
    int d = idx % HD;
    idx /= HD;
    int nh = idx % NH;
    idx /= NH;
    int c = idx % 3;
    idx /= 3;
    int n = idx % N;
    int b = idx / N;

    int inp_idx;
    int nh_total = NH + 2 * (NH / replicate_factor);
    if (c == 0) {
        inp_idx = b * N * nh_total * HD + n * nh_total * HD + 0 * NH * HD + nh * HD + d;
    } else if (c == 1) {
        inp_idx = b * N * nh_total * HD + n * nh_total * HD + 1 * NH * HD + (nh / replicate_factor) * HD + d;
    } else {
        inp_idx = b * N * nh_total * HD + n * nh_total * HD + (NH * HD + (NH / replicate_factor) * HD)
                  + (nh / replicate_factor) * HD + d;
    }

    replicated_qkv[idx_flat] = __ldcs(&gqa_qkv[inp_idx]);
}
