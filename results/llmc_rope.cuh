// llm.c's RoPE kernels, as the chain benchmark (scripts/bench_chain.py) launches them: a
// re-implementation of rope_forward_kernel1 and rope_backward_inplace_kernel1 of karpathy/llm.c,
// llmc/rope.cuh at commit ae6917f6f260d714de5715872385f7e1e976c4a3 (branch llama3), kept to
// their thread mapping, int index arithmetic, loads, float math and rounding; only floatX
// became a template parameter (llm.c fixes it at build time) so one source serves every dtype.
//
// One thread per (x0, x1) pair of the replicated tensor (B, T, 3, n_head, head_dim): B*T*3*
// n_head*head_dim/2 threads, decoded from the flat thread index with int arithmetic (so the
// tensor stays below 2^31 elements). A thread of a value head (qkv == 2) returns at once; a
// query or key thread reads its pair and (cos, sin) of its position t from freqs_cis (T,
// head_dim) as plain loads widened to float, rotates in float and stores each result rounded to
// floatX (the implicit float -> floatX conversion: round to nearest even). llm.c calls both
// with in == out (in place) and block 128; the chain benchmark also times other blocks.
//
// Needs <cuda_fp16.h> and <cuda_bf16.h> (the benchmark compiles it after variants/common.cuh).

template <typename floatX>
__global__ void llmc_rope_forward_kernel1(floatX* out, const floatX* inp, const floatX* freqs_cis, int B, int T,
                                          int n_head, int head_dim) {
    const int thread = blockIdx.x * blockDim.x + threadIdx.x;
    const int half = head_dim / 2;
    if (thread >= B * T * 3 * n_head * half) { return; }
    const int part = (thread / (n_head * half)) % 3;  // 0 q, 1 k, 2 v
    if (part == 2) { return; }                          // v is never rotated
    const int b = thread / (T * 3 * n_head * half);
    const int t = (thread / (3 * n_head * half)) % T;
    const int h = (thread / half) % n_head;
    const int pair = thread % half;
    const int token_base = b * (T * 3 * n_head * head_dim) + t * (3 * n_head * head_dim);
    const int head_base = token_base + part * (n_head * head_dim) + h * head_dim;
    const int at = head_base + 2 * pair;
    const int freqs_at = t * head_dim + 2 * pair;
    const float c = freqs_cis[freqs_at];
    const float s = freqs_cis[freqs_at + 1];
    const float x0 = inp[at];
    const float x1 = inp[at + 1];
    out[at] = x0 * c - x1 * s;
    out[at + 1] = x0 * s + x1 * c;
}

template <typename floatX>
__global__ void llmc_rope_backward_inplace_kernel1(floatX* dinp, const floatX* dout, const floatX* freqs_cis, int B,
                                                   int T, int n_head, int head_dim) {
    const int thread = blockIdx.x * blockDim.x + threadIdx.x;
    const int half = head_dim / 2;
    if (thread >= B * T * 3 * n_head * half) { return; }
    const int part = (thread / (n_head * half)) % 3;
    if (part == 2) { return; }
    const int b = thread / (T * 3 * n_head * half);
    const int t = (thread / (3 * n_head * half)) % T;
    const int h = (thread / half) % n_head;
    const int pair = thread % half;
    const int token_base = b * (T * 3 * n_head * head_dim) + t * (3 * n_head * head_dim);
    const int head_base = token_base + part * (n_head * head_dim) + h * head_dim;
    const int at = head_base + 2 * pair;
    const int freqs_at = t * head_dim + 2 * pair;
    const float c = freqs_cis[freqs_at];
    const float s = freqs_cis[freqs_at + 1];
    const float d0 = (float)dout[at];
    const float d1 = (float)dout[at + 1];
    dinp[at] = d0 * c + d1 * s;  // the transpose of the forward rotation
    dinp[at + 1] = -d0 * s + d1 * c;
}
