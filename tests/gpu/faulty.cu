// Test-only kernels with planted faults, one per MODE, to prove that every fault becomes a
// recorded row and the study goes on:
//   0 correct (a plain scalar gather, grid-stride)   1 wrong result (writes 1)
//   2 hang (one thread sleeps forever)               3 illegal address (stores through null)
//   4 launch failure (__launch_bounds__(32), launched with 1024 threads)
//   5 compile error (a failing static_assert)
template <typename T, int MODE>
__global__ void __launch_bounds__(MODE == 4 ? 32 : 1024)
    repkv_faulty(T* dinp, const T* dout, int B, int T_, int NH, int NH_KV, int HD) {
    static_assert(MODE != 5, "planted compile error");
    const long long n = (long long)B * T_ * (NH + 2 * NH_KV) * HD;
    const int heads_in = NH + 2 * NH_KV, nrep = NH / NH_KV;
    if (MODE == 2 && blockIdx.x == 0 && threadIdx.x == 0) {
        for (;;) __nanosleep(1000000);
    }
    if (MODE == 3 && blockIdx.x == 0 && threadIdx.x == 0) {
        *reinterpret_cast<volatile T*>(static_cast<size_t>(16)) = dout[0];
    }
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        const int d = i % HD, h = (i / HD) % heads_in;
        const long long token = i / ((long long)HD * heads_in);
        const T* src = dout + token * 3 * NH * HD + d;
        float acc = 0.0f;
        if (h < NH) {
            acc = to_float(src[h * HD]);
        } else {
            for (int r = 0; r < nrep; r++) acc += to_float(src[(NH + (h - NH) * nrep + r) * HD]);
        }
        dinp[i] = from_float<T>(MODE == 1 ? 1.0f : acc);
    }
}
