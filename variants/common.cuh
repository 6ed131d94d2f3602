// repkv-tune: code shared by every kernel family (prepended to each family's template).
//
// Shapes, as in llm.c:
//   dout: (B, T, 3, NH, HD)          the gradient of the replicated q, k, v
//   dinp: (B, T, NH + 2*NH_KV, HD)   the gradient of the packed GQA qkv
// Viewing a token's dout row as 3*NH heads of HD elements, the K replicas of KV head g are
// heads NH + g*nrep + r and the V replicas are heads NH + NH*1 + g*nrep + r = NH + (NH_KV+g)*nrep + r.
// So with j = dinp head - NH (j < 2*NH_KV covers K then V):
//   dinp[t, h]      = dout[t, h]                                   h < NH
//   dinp[t, NH + j] = sum_{r < nrep} dout[t, NH + j*nrep + r]      j < 2*NH_KV
// Every family takes the same arguments: (T* dinp, const T* dout, B, T, NH, NH_KV, HD).
#include <cuda_fp16.h>
#include <cuda_bf16.h>

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ float from_float<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
    return __float2bfloat16_rn(x);
}

// The machine word of one vectorized load or store.
template <int BYTES> struct Word;
template <> struct Word<2> { using type = unsigned short; };
template <> struct Word<4> { using type = unsigned int; };
template <> struct Word<8> { using type = uint2; };
template <> struct Word<16> { using type = uint4; };

// LOAD: 0 plain, 1 __ldg (read-only data path), 2 __ldcs (streaming: evict first).
template <int LOAD, typename W> __device__ __forceinline__ W load_word(const W* p) {
    if constexpr (LOAD == 1) {
        return __ldg(p);
    } else if constexpr (LOAD == 2) {
        return __ldcs(p);
    } else {
        return *p;
    }
}

// STORE: 0 plain, 1 __stcs (streaming).
template <int STORE, typename W> __device__ __forceinline__ void store_word(W* p, W w) {
    if constexpr (STORE == 1) {
        __stcs(p, w);
    } else {
        *p = w;
    }
}

// N = VEC_BYTES / sizeof(T) elements travel in one word W; sums are kept in fp32.
template <typename T, int VEC_BYTES> struct Vec {
    static constexpr int N = VEC_BYTES / int(sizeof(T));
    static_assert(N >= 1 && N * int(sizeof(T)) == VEC_BYTES, "vector narrower than its element");
    using W = typename Word<VEC_BYTES>::type;

    static __device__ __forceinline__ void accumulate(float (&acc)[N], W w) {
        T e[N];
        memcpy(e, &w, sizeof(W));
#pragma unroll
        for (int i = 0; i < N; i++) acc[i] += to_float(e[i]);
    }

    static __device__ __forceinline__ W pack(const float (&acc)[N]) {
        T e[N];
#pragma unroll
        for (int i = 0; i < N; i++) e[i] = from_float<T>(acc[i]);
        W w;
        memcpy(&w, e, sizeof(W));
        return w;
    }
};
