// The exported header's test bench, built as llm.c's dev/cuda programs are: every shape is
// validated against a CPU reference first, then timed beside llm.c's kernel1 at block 128
// (its hard-coded default) and a device-to-device copy of the same bytes.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -Xcompiler -fopenmp -I<dir of repkv_tuned.cuh> \
//        header_harness.cu -o harness
//   ./harness bf16 8,1024,32,8,128 4,2048,28,4,128 ...    validate, then time (GPU)
//   ./harness --plan bf16 8,1024,32,8,128 ...             the dispatch decision only (no GPU)
//
// Shapes are B,T,NH,NH_KV,HD. Exit status 1 if any shape fails validation.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "repkv_tuned.cuh"

#define CUDA_CHECK(call)                                                                         \
    do {                                                                                         \
        cudaError_t err_ = (call);                                                               \
        if (err_ != cudaSuccess) {                                                               \
            fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(err_), __FILE__, __LINE__); \
            exit(2);                                                                             \
        }                                                                                        \
    } while (0)

struct Shape {
    int B, T, NH, NH_KV, HD;
};

// llm.c's kernel1 (reimplemented): one thread per dout element, int indices; the K/V
// threads of all but the first replica stay idle, the first sums its nrep replicas.
template <typename floatX>
__global__ void llmc_kernel1(floatX* dinp, const floatX* dout, int B, int T, int NH, int nrep, int d) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * T * 3 * NH * d) return;
    int d_ = idx % d;
    idx /= d;
    int nh = idx % NH;
    idx /= NH;
    int c = idx % 3;
    idx /= 3;
    int t = idx % T;
    int b = idx / T;
    int NH_KV = NH / nrep;
    int Cin = (NH + 2 * NH_KV) * d;
    int row = (b * T + t) * Cin;
    if (c == 0) {
        dinp[row + nh * d + d_] = dout[(((b * T + t) * 3 + 0) * NH + nh) * d + d_];
    } else if (nh % nrep == 0) {
        float sum = 0.0f;
        for (int r = 0; r < nrep; r++)
            sum += (float)dout[(((b * T + t) * 3 + c) * NH + nh + r) * d + d_];
        dinp[row + (NH + (c - 1) * NH_KV + nh / nrep) * d + d_] = (floatX)sum;
    }
}

template <typename floatX> float to_f(floatX x) { return (float)x; }
template <> float to_f<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }
template <> float to_f<__half>(__half x) { return __half2float(x); }
template <typename floatX> floatX from_f(float x) { return (floatX)x; }
template <> __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return __float2bfloat16(x); }
template <> __half from_f<__half>(float x) { return __float2half(x); }

template <typename floatX> double unit_roundoff();
template <> double unit_roundoff<float>() { return ldexp(1.0, -24); }
template <> double unit_roundoff<__nv_bfloat16>() { return ldexp(1.0, -8); }
template <> double unit_roundoff<__half>() { return ldexp(1.0, -11); }

// dinp[t, h] = dout[t, 0, h]; dinp[t, NH + j] = sum_r dout[t, 1 + j / NH_KV, (j % NH_KV) * nrep + r].
static void reference(std::vector<double>& ref, const std::vector<float>& x, const Shape& s) {
    const long long tokens = (long long)s.B * s.T;
    const int nrep = s.NH / s.NH_KV, heads_in = s.NH + 2 * s.NH_KV;
#pragma omp parallel for schedule(static)
    for (long long t = 0; t < tokens; t++) {
        const float* row = &x[t * 3 * s.NH * s.HD];
        double* out = &ref[t * heads_in * s.HD];
        for (int h = 0; h < s.NH; h++)
            for (int d = 0; d < s.HD; d++) out[h * s.HD + d] = row[h * s.HD + d];
        for (int j = 0; j < 2 * s.NH_KV; j++) {
            const int part = 1 + j / s.NH_KV, g = j % s.NH_KV;
            for (int d = 0; d < s.HD; d++) {
                double sum = 0.0;
                for (int r = 0; r < nrep; r++) sum += row[(part * s.NH + g * nrep + r) * s.HD + d];
                out[(s.NH + j) * s.HD + d] = sum;
            }
        }
    }
}

static float median_of(std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Median of reps calls, each after flushing L2 (a memset of a buffer twice its size).
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
    return median_of(times);
}

static std::string describe(const repkv_tuned::Plan& p) {
    char text[96];
    if (p.row >= 0)
        snprintf(text, sizeof text, "row %d (tuned B*T %lld)", p.row, repkv_tuned::ROWS[p.row].tokens);
    else
        snprintf(text, sizeof text, "generic %d", -1 - p.kernel);
    return text;
}

template <typename floatX> static bool run_shape(const Shape& s, const char* dtype, int reps) {
    const long long tokens = (long long)s.B * s.T;
    const size_t n_out = (size_t)tokens * 3 * s.NH * s.HD;
    const size_t n_in = (size_t)tokens * (s.NH + 2 * s.NH_KV) * s.HD;
    const int nrep = s.NH / s.NH_KV;

    // Fresh uniform values in [-2, 2) (never zeros), from a xorshift generator.
    std::vector<float> x(n_out);
    std::vector<floatX> host(n_out);
    uint64_t state = 0x9e3779b97f4a7c15ULL ^ (uint64_t)tokens;
    float max_abs = 0.0f;
    for (size_t i = 0; i < n_out; i++) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        host[i] = from_f<floatX>((float)(state >> 40) * (4.0f / 16777216.0f) - 2.0f);
        x[i] = to_f(host[i]);  // the reference sees exactly the values the GPU gets
        max_abs = std::max(max_abs, fabsf(x[i]));
    }
    std::vector<double> ref(n_in);
    reference(ref, x, s);

    floatX *d_out, *d_in;
    CUDA_CHECK(cudaMalloc(&d_out, n_out * sizeof(floatX)));
    CUDA_CHECK(cudaMalloc(&d_in, n_in * sizeof(floatX)));
    CUDA_CHECK(cudaMemcpy(d_out, host.data(), n_out * sizeof(floatX), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemset(d_in, 0xff, n_in * sizeof(floatX)));  // NaN in fp32, bf16 and fp16

    repkv_backward(d_in, d_out, s.B, s.T, s.NH, s.NH_KV, s.HD);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<floatX> got(n_in);
    CUDA_CHECK(cudaMemcpy(got.data(), d_in, n_in * sizeof(floatX), cudaMemcpyDeviceToHost));
    const double atol = (double)nrep * nrep * ldexp(1.0, -24) * std::max(1.0f, max_abs);
    const double rtol = 2.0 * unit_roundoff<floatX>();
    size_t bad = 0;
#pragma omp parallel for reduction(+ : bad) schedule(static)
    for (long long i = 0; i < (long long)n_in; i++) {
        const double g = to_f(got[i]);
        if (!(fabs(g - ref[i]) <= atol + rtol * fabs(ref[i]))) bad++;  // NaN fails too
    }
    for (size_t i = 0, shown = 0; bad && i < n_in && shown < 3; i++) {
        const double g = to_f(got[i]);
        if (!(fabs(g - ref[i]) <= atol + rtol * fabs(ref[i]))) {
            fprintf(stderr, "  mismatch at %zu: expected %.6f, got %.6f\n", i, ref[i], g);
            shown++;
        }
    }

    int device = 0, l2 = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
    const size_t flush_bytes = 2 * (size_t)std::max(l2, 1 << 20);
    char* flush;
    CUDA_CHECK(cudaMalloc(&flush, flush_bytes));
    const size_t bytes = (n_out + n_in) * sizeof(floatX);
    char *copy_src, *copy_dst;
    CUDA_CHECK(cudaMalloc(&copy_src, bytes / 2));
    CUDA_CHECK(cudaMalloc(&copy_dst, bytes / 2));

    const float tuned = time_ms([&] { repkv_backward(d_in, d_out, s.B, s.T, s.NH, s.NH_KV, s.HD); }, flush,
                                flush_bytes, reps);
    float kernel1 = NAN;
    if (n_out <= 0x7fffffffULL - 128) {
        const int grid = (int)((n_out + 127) / 128);
        kernel1 = time_ms([&] { llmc_kernel1<<<grid, 128>>>(d_in, d_out, s.B, s.T, s.NH, nrep, s.HD); },
                          flush, flush_bytes, reps);
    }
    // A copy of the same bytes: half of them read, half written.
    const float copy = time_ms(
        [&] { CUDA_CHECK(cudaMemcpyAsync(copy_dst, copy_src, bytes / 2, cudaMemcpyDeviceToDevice)); }, flush,
        flush_bytes, reps);

    const repkv_tuned::Plan p =
        repkv_tuned::plan(repkv_tuned::DTypeId<floatX>::value, s.B, s.T, s.NH, s.NH_KV, s.HD);
    printf("| %d,%d,%d,%d,%d | %s | %.1f | %s | %s | %.4f | %.4f | %.2fx | %.3f |\n", s.B, s.T, s.NH, s.NH_KV,
           s.HD, dtype, bytes / 1e6, describe(p).c_str(), bad ? "FAIL" : "ok", tuned, kernel1, kernel1 / tuned,
           tuned / copy);
    fflush(stdout);
    CUDA_CHECK(cudaFree(d_out));
    CUDA_CHECK(cudaFree(d_in));
    CUDA_CHECK(cudaFree(flush));
    CUDA_CHECK(cudaFree(copy_src));
    CUDA_CHECK(cudaFree(copy_dst));
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
    if (argc <= arg + 1) {
        fprintf(stderr, "usage: %s [--plan] fp32|bf16|fp16 B,T,NH,NH_KV,HD ...\n", argv[0]);
        return 2;
    }
    const std::string dtype = argv[arg++];
    const int id = dtype == "fp32" ? 0 : dtype == "bf16" ? 1 : dtype == "fp16" ? 2 : -1;
    if (id < 0) {
        fprintf(stderr, "unknown dtype %s: use fp32, bf16 or fp16\n", dtype.c_str());
        return 2;
    }
    if (!plan_only) {
        printf("| shape | dtype | MB | served by | valid | tuned ms | kernel1@128 ms | vs kernel1 | x copy |\n");
        printf("|---|---|---|---|---|---|---|---|---|\n");
    }
    bool ok = true;
    for (; arg < argc; arg++) {
        Shape s;
        if (!parse(argv[arg], &s)) {
            fprintf(stderr, "bad shape %s: want B,T,NH,NH_KV,HD, positive, NH divisible by NH_KV\n", argv[arg]);
            return 2;
        }
        if (plan_only) {
            const repkv_tuned::Plan p = repkv_tuned::plan(id, s.B, s.T, s.NH, s.NH_KV, s.HD);
            printf("%s %d %d %d %d %d kernel=%d row=%d grid=%lld block=%d\n", dtype.c_str(), s.B, s.T, s.NH,
                   s.NH_KV, s.HD, p.kernel, p.row, p.grid, p.block);
            continue;
        }
        if (id == 0) ok &= run_shape<float>(s, "fp32", 50);
        if (id == 1) ok &= run_shape<__nv_bfloat16>(s, "bf16", 50);
        if (id == 2) ok &= run_shape<__half>(s, "fp16", 50);
    }
    return ok ? 0 : 1;
}
