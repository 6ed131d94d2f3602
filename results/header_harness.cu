// The exported header's test bench, built as llm.c's dev/cuda programs are: every shape is
// validated against a float64 CPU reference, then timed beside a device copy of the same bytes
// and beside llm.c's own kernels for the same work at its hard-coded block 128 (repkv kernel1, and
// for the RoPE ops llm.c's rope kernel after or before it, as train_llama3.cu chains them).
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -Xcompiler -fopenmp -I<dir of repkv_tuned.cuh> \
//        header_harness.cu -o harness
//   ./harness [--op OP] bf16 8,1024,32,8,128 4,2048,28,4,128 ...    validate, then time (GPU)
//   ./harness --plan [--op OP] bf16 8,1024,32,8,128 ...             the dispatch decision only (no GPU)
//
// OP: repkv_backward (default), repkv_forward, rope_repkv_forward or repkv_rope_backward. Shapes
// are B,T,NH,NH_KV,HD. Exit status 1 if any shape fails validation.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "repkv_tuned.cuh"
#include "llmc_rope.cuh"  // llm.c's RoPE kernels (also scripts/bench_chain.py's)

#define CUDA_CHECK(call) \
    do { \
        cudaError_t e_ = (call); \
        if (e_ != cudaSuccess) { \
            fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
            exit(2); \
        } \
    } while (0)

struct Shape {
    int B, T, NH, NH_KV, HD;
};

// The header's ops: forward ones read inp (B, T, NH + 2*NH_KV, HD) and write (B, T, 3, NH, HD),
// backward ones the other way round; the RoPE ones read freqs_cis (T, HD) too.
namespace rt = repkv_tuned;
struct Op {
    const char* name;
    rt::Plan (*plan)(int, int, int, int, int, int);
    const rt::Row* rows;
    bool forward, rope;
};
static const Op OPS[] = {
    {"repkv_backward", rt::op_repkv_backward::plan, rt::op_repkv_backward::ROWS, false, false},
    {"repkv_forward", rt::op_repkv_forward::plan, rt::op_repkv_forward::ROWS, true, false},
    {"rope_repkv_forward", rt::op_rope_repkv_forward::plan, rt::op_rope_repkv_forward::ROWS, true, true},
    {"repkv_rope_backward", rt::op_repkv_rope_backward::plan, rt::op_repkv_rope_backward::ROWS, false, true},
};

// Element idx of the replicated tensor (B*T, 3, NH, d), as llm.c's kernel1s decode it with int
// indices: its offset d_ in the head, head nh, part c (q, k, v) and the start of its token's row
// in the packed (B*T, NH + 2*NH_KV, d) tensor.
struct Replicated {
    int d_, nh, c, row;
};
__device__ Replicated decode(int idx, int NH, int nrep, int d) {
    const int NH_KV = NH / nrep, bt = idx / d / NH / 3;
    return {idx % d, idx / d % NH, idx / d / NH % 3, bt * (NH + 2 * NH_KV) * d};
}

// llm.c's repkv_backward_kernel1 (reimplemented): one thread per dout element; the K/V threads
// of all but the first replica stay idle, the first sums its nrep replicas.
template <typename floatX>
__global__ void llmc_kernel1(floatX* dinp, const floatX* dout, int B, int T, int NH, int nrep, int d) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * T * 3 * NH * d) return;
    const Replicated e = decode(idx, NH, nrep, d);
    if (e.c == 0) {
        dinp[e.row + e.nh * d + e.d_] = dout[idx];
    } else if (e.nh % nrep == 0) {
        float sum = 0.0f;
        for (int r = 0; r < nrep; r++) sum += (float)dout[idx + r * d];
        dinp[e.row + (NH + (e.c - 1) * (NH / nrep) + e.nh / nrep) * d + e.d_] = (floatX)sum;
    }
}

// llm.c's repkv_forward_kernel1 (reimplemented): one thread per out element, each copying its
// source element of inp (q head nh, or K/V head nh / nrep).
template <typename floatX>
__global__ void llmc_forward_kernel1(floatX* out, const floatX* inp, int B, int T, int NH, int nrep, int d) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * T * 3 * NH * d) return;
    const Replicated e = decode(idx, NH, nrep, d);
    const int head = e.c == 0 ? e.nh : NH + (e.c - 1) * (NH / nrep) + e.nh / nrep;
    out[idx] = __ldcs(&inp[e.row + head * d + e.d_]);
}

// What llm.c runs for the op at block 128 (train_llama3.cu's calls): forward, repkv_forward (a
// cudaMemcpy where nrep is 1), then for RoPE rope_forward in place; backward, for RoPE
// rope_backward_inplace on dout, then repkv_backward. Only where every index fits an int.
template <typename floatX>
static bool llmc_chain(const Op& op, floatX* y, floatX* x, const floatX* f, const Shape& s) {
    const long long n_rep = (long long)s.B * s.T * 3 * s.NH * s.HD;
    if (n_rep > 0x7fffffffLL - 128) return false;
    const int nrep = s.NH / s.NH_KV, grid = (int)((n_rep + 127) / 128), pairs = (int)((n_rep / 2 + 127) / 128);
    if (op.forward) {
        if (nrep == 1) CUDA_CHECK(cudaMemcpy(y, x, n_rep * sizeof(floatX), cudaMemcpyDeviceToDevice));
        else llmc_forward_kernel1<<<grid, 128>>>(y, x, s.B, s.T, s.NH, nrep, s.HD);
        if (op.rope) llmc_rope_forward_kernel1<<<pairs, 128>>>(y, y, f, s.B, s.T, s.NH, s.HD);
    } else {
        if (op.rope) llmc_rope_backward_inplace_kernel1<<<pairs, 128>>>(x, x, f, s.B, s.T, s.NH, s.HD);
        llmc_kernel1<<<grid, 128>>>(y, x, s.B, s.T, s.NH, nrep, s.HD);
    }
    return true;
}

template <typename floatX> float to_f(floatX x) { return (float)x; }
template <> float to_f<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }
template <> float to_f<__half>(__half x) { return __half2float(x); }
template <typename floatX> floatX from_f(float x) { return (floatX)x; }
template <> __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return __float2bfloat16(x); }
template <> __half from_f<__half>(float x) { return __float2half(x); }

template <typename floatX> double unit_roundoff() {
    return ldexp(1.0, sizeof(floatX) == 4 ? -24 : std::is_same<floatX, __half>::value ? -11 : -8);
}

// Token t, position t % T. Forward: out head h reads inp head h (q), NH + r/nrep (k) or NH + NH_KV
// + r/nrep (v), r = h % NH. Backward: dinp head h < NH is dout head h; NH + j sums dout heads
// NH + j*nrep + i, i < nrep. RoPE rotates q and k pairs (2i, 2i+1) by freqs_cis (cos, sin) of the
// position; backward by the transpose, before the sum (llm.c's rope.cuh).
static void rotate(double* x, const float* f, int HD, bool backward) {
    for (int i = 0; i + 1 < HD; i += 2) {
        const double x0 = x[i], x1 = x[i + 1], c = f[i], s = f[i + 1];
        x[i] = backward ? x0 * c + x1 * s : x0 * c - x1 * s;
        x[i + 1] = backward ? -x0 * s + x1 * c : x0 * s + x1 * c;
    }
}

static void reference(std::vector<double>& ref, const std::vector<float>& x, const std::vector<float>& freqs,
                      const Shape& s, const Op& op) {
    const long long tokens = (long long)s.B * s.T;
    const int nrep = s.NH / s.NH_KV, heads_in = s.NH + 2 * s.NH_KV, HD = s.HD;
    const int heads_x = op.forward ? heads_in : 3 * s.NH, heads_ref = op.forward ? 3 * s.NH : heads_in;
#pragma omp parallel for schedule(static)
    for (long long t = 0; t < tokens; t++) {
        const float* row = &x[t * heads_x * HD];
        const float* f = op.rope ? &freqs[(t % s.T) * HD] : nullptr;
        std::vector<double> head(HD);
        for (int h = 0; h < heads_ref; h++) {
            double* out = &ref[(t * heads_ref + h) * HD];
            const int c = h / s.NH, r = h % s.NH;  // forward: q, k or v replica r
            const int src = c == 0 ? r : s.NH + (c - 1) * s.NH_KV + r / nrep;
            const int first = h < s.NH ? h : s.NH + (h - s.NH) * nrep, count = h < s.NH ? 1 : nrep;
            const bool rotated = op.rope && (op.forward ? c < 2 : h < s.NH + s.NH_KV);
            for (int d = 0; d < HD; d++) out[d] = 0.0;
            for (int i = 0; i < (op.forward ? 1 : count); i++) {
                const float* in = &row[(op.forward ? src : first + i) * HD];
                for (int d = 0; d < HD; d++) head[d] = in[d];
                if (rotated) rotate(head.data(), f, HD, !op.forward);
                for (int d = 0; d < HD; d++) out[d] += head[d];
            }
        }
    }
}

// Median of reps calls, each after flushing L2 (a memset twice its size).
template <typename F> static float time_ms(F call, char* flush, size_t flush_bytes, int reps) {
    cudaEvent_t start, stop;
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
    std::vector<float> times;
    for (int i = 0; i < reps + 3; i++) {
        CUDA_CHECK(cudaMemsetAsync(flush, i & 0xff, flush_bytes));
        CUDA_CHECK(cudaEventRecord(start));
        call();
        CUDA_CHECK(cudaEventRecord(stop));
        CUDA_CHECK(cudaEventSynchronize(stop));
        CUDA_CHECK(cudaGetLastError());
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
        if (i >= 3) times.push_back(ms);  // the first calls warm up
    }
    CUDA_CHECK(cudaEventDestroy(start));
    CUDA_CHECK(cudaEventDestroy(stop));
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

static std::string describe(const Op& op, const rt::Plan& p) {
    char text[96];
    if (p.row >= 0) snprintf(text, sizeof text, "row %d (tuned B*T %lld)", p.row, op.rows[p.row].tokens);
    if (p.row < 0) snprintf(text, sizeof text, "generic %d", -1 - p.kernel);
    return text;
}

// llm.c's precompute_freqs_cis(dim = HD, end = T, theta = 500000, use_scaled = 0), rounded to floatX.
template <typename floatX> static std::vector<floatX> freqs_cis(int T, int HD) {
    std::vector<floatX> f((size_t)T * HD, from_f<floatX>(0.0f));
    for (int i = 0; i < HD / 2; i++) {
        const float freq = 1.0f / powf(500000.0f, (float)(2 * i) / HD);
        for (int t = 0; t < T; t++) {
            f[(size_t)t * HD + 2 * i] = from_f<floatX>(cosf((float)t * freq));
            f[(size_t)t * HD + 2 * i + 1] = from_f<floatX>(sinf((float)t * freq));
        }
    }
    return f;
}

template <typename floatX>
static void call(const Op& op, floatX* y, const floatX* x, const floatX* f, const Shape& s) {
    const std::string name = op.name;
    cudaStream_t st = 0;
    if (name == "repkv_backward") repkv_backward(y, x, s.B, s.T, s.NH, s.NH_KV, s.HD);  // stream-less
    if (name == "repkv_forward") repkv_forward(y, x, s.B, s.T, s.NH, s.NH_KV, s.HD, st);
    if (name == "rope_repkv_forward") rope_repkv_forward(y, x, f, s.B, s.T, s.NH, s.NH_KV, s.HD, st);
    if (name == "repkv_rope_backward") repkv_rope_backward(y, x, f, s.B, s.T, s.NH, s.NH_KV, s.HD, st);
}

template <typename floatX> static bool run_shape(const Op& op, const Shape& s, const char* dtype, int reps) {
    const long long tokens = (long long)s.B * s.T;
    const size_t n_rep = (size_t)tokens * 3 * s.NH * s.HD;
    const size_t n_gqa = (size_t)tokens * (s.NH + 2 * s.NH_KV) * s.HD;
    const size_t n_x = op.forward ? n_gqa : n_rep, n_y = op.forward ? n_rep : n_gqa;
    const int nrep = s.NH / s.NH_KV;

    // Fresh uniform values in [-2, 2) (never zeros), from xorshift.
    std::vector<float> x(n_x);
    std::vector<floatX> host(n_x);
    uint64_t state = 0x9e3779b97f4a7c15ULL ^ (uint64_t)tokens;
    float max_abs = 0.0f;
    for (size_t i = 0; i < n_x; i++) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        host[i] = from_f<floatX>((float)(state >> 40) * (4.0f / 16777216.0f) - 2.0f);
        x[i] = to_f(host[i]);  // the values the GPU gets
        max_abs = std::max(max_abs, fabsf(x[i]));
    }
    const std::vector<floatX> host_f = freqs_cis<floatX>(s.T, s.HD);
    std::vector<float> f;
    for (const floatX v : host_f) f.push_back(to_f(v));
    std::vector<double> ref(n_y);
    reference(ref, x, f, s, op);

    floatX *d_x, *d_y, *d_f;
    CUDA_CHECK(cudaMalloc(&d_x, n_x * sizeof(floatX)));
    CUDA_CHECK(cudaMalloc(&d_y, n_y * sizeof(floatX)));
    CUDA_CHECK(cudaMalloc(&d_f, host_f.size() * sizeof(floatX)));
    CUDA_CHECK(cudaMemcpy(d_x, host.data(), n_x * sizeof(floatX), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_f, host_f.data(), host_f.size() * sizeof(floatX), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemset(d_y, 0xff, n_y * sizeof(floatX)));  // NaN in fp32, bf16 and fp16

    call(op, d_y, d_x, d_f, s);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<floatX> got(n_y);
    CUDA_CHECK(cudaMemcpy(got.data(), d_y, n_y * sizeof(floatX), cudaMemcpyDeviceToHost));
    // The ops' tolerances (variants/): a copy is exact; sums err by nrep^2 fp32 ulps of max|x|,
    // a rotation by 4 (twice that after a sum); each result is rounded once to floatX.
    const double u32 = ldexp(1.0, -24), big = std::max(1.0f, max_abs), sums = (double)nrep * nrep * u32 * big;
    const double rope = 4.0 * (op.forward ? 1 : nrep) * u32 * big;
    const double atol = (op.forward ? 0.0 : op.rope ? 2.0 * sums : sums) + (op.rope ? rope : 0.0);
    const double rtol = op.forward && !op.rope ? 0.0 : 2.0 * unit_roundoff<floatX>();
    auto wrong = [&](size_t i) { return !(fabs(to_f(got[i]) - ref[i]) <= atol + rtol * fabs(ref[i])); };
    size_t bad = 0;  // NaN fails too
#pragma omp parallel for reduction(+ : bad) schedule(static)
    for (long long i = 0; i < (long long)n_y; i++) bad += wrong(i);
    for (size_t i = 0, shown = 0; bad && i < n_y && shown < 3; i++)
        if (wrong(i)) fprintf(stderr, "  mismatch at %zu: expected %.6f, got %.6f\n", i, ref[i], to_f(got[i])), shown++;

    int device = 0, l2 = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
    const size_t flush_bytes = 2 * (size_t)std::max(l2, 1 << 20);
    char* flush;
    CUDA_CHECK(cudaMalloc(&flush, flush_bytes));
    const size_t bytes = (n_x + n_y) * sizeof(floatX);
    char *copy_src, *copy_dst;
    CUDA_CHECK(cudaMalloc(&copy_src, bytes / 2));
    CUDA_CHECK(cudaMalloc(&copy_dst, bytes / 2));

    const float tuned = time_ms([&] { call(op, d_y, d_x, d_f, s); }, flush, flush_bytes, reps);
    // llm.c's chain last: its backward rotates dout in place
    float kernel1 = NAN;
    if (llmc_chain(op, d_y, d_x, d_f, s))
        kernel1 = time_ms([&] { llmc_chain(op, d_y, d_x, d_f, s); }, flush, flush_bytes, reps);
    // A copy of the same bytes: half read, half written.
    const float copy = time_ms(
        [&] { CUDA_CHECK(cudaMemcpyAsync(copy_dst, copy_src, bytes / 2, cudaMemcpyDeviceToDevice)); }, flush,
        flush_bytes, reps);

    const rt::Plan p = op.plan(rt::DTypeId<floatX>::value, s.B, s.T, s.NH, s.NH_KV, s.HD);
    printf("| %s | %d,%d,%d,%d,%d | %s | %.1f | %s | %s | %.4f | %.4f | %.2fx | %.3f |\n", op.name, s.B, s.T, s.NH,
           s.NH_KV, s.HD, dtype, bytes / 1e6, describe(op, p).c_str(), bad ? "FAIL" : "ok", tuned, kernel1,
           kernel1 / tuned, tuned / copy);
    fflush(stdout);
    for (void* ptr : {(void*)d_x, (void*)d_y, (void*)d_f, (void*)flush, (void*)copy_src, (void*)copy_dst})
        CUDA_CHECK(cudaFree(ptr));
    return bad == 0;
}

static bool parse(const char* text, Shape* s) {
    return sscanf(text, "%d,%d,%d,%d,%d", &s->B, &s->T, &s->NH, &s->NH_KV, &s->HD) == 5 && s->B > 0 &&
           s->T > 0 && s->NH > 0 && s->NH_KV > 0 && s->HD > 0 && s->NH % s->NH_KV == 0;
}

int main(int argc, char** argv) {
    int arg = 1;
    const bool plan_only = argc > arg && strcmp(argv[arg], "--plan") == 0;
    if (plan_only) arg++;
    const Op* op = &OPS[0];
    if (argc > arg + 1 && strcmp(argv[arg], "--op") == 0) {
        op = nullptr;
        for (const Op& o : OPS)
            if (strcmp(o.name, argv[arg + 1]) == 0) op = &o;
        if (!op) {
            fprintf(stderr, "unknown op %s\n", argv[arg + 1]);
            return 2;
        }
        arg += 2;
    }
    if (argc <= arg + 1) {
        fprintf(stderr, "usage: %s [--plan] [--op OP] fp32|bf16|fp16 B,T,NH,NH_KV,HD ...\n", argv[0]);
        return 2;
    }
    const std::string dtype = argv[arg++];
    const int id = dtype == "fp32" ? 0 : dtype == "bf16" ? 1 : dtype == "fp16" ? 2 : -1;
    if (id < 0) {
        fprintf(stderr, "unknown dtype %s: use fp32, bf16 or fp16\n", dtype.c_str());
        return 2;
    }
    if (!plan_only) {
        printf("| op | shape | dtype | MB | served by | valid | tuned ms | llm.c@128 ms | vs llm.c | x copy |\n");
        printf("|---|---|---|---|---|---|---|---|---|---|\n");
    }
    bool ok = true;
    for (; arg < argc; arg++) {
        Shape s;
        if (!parse(argv[arg], &s)) {
            fprintf(stderr, "bad shape %s: want B,T,NH,NH_KV,HD, positive, NH divisible by NH_KV\n", argv[arg]);
            return 2;
        }
        if (plan_only) {
            const rt::Plan p = op->plan(id, s.B, s.T, s.NH, s.NH_KV, s.HD);
            printf("%s %d %d %d %d %d kernel=%d row=%d grid=%lld block=%d\n", dtype.c_str(), s.B, s.T, s.NH,
                   s.NH_KV, s.HD, p.kernel, p.row, p.grid, p.block);
            continue;
        }
        if (id == 0) ok &= run_shape<float>(*op, s, "fp32", 50);
        if (id == 1) ok &= run_shape<__nv_bfloat16>(*op, s, "bf16", 50);
        if (id == 2) ok &= run_shape<__half>(*op, s, "fp16", 50);
    }
    return ok ? 0 : 1;
}
