// RoPE as llm.c computes it (llmc/rope.cuh, branch llama3): freqs_cis is (T, HD) of T holding
// (cos, sin) of position t at frequency i in elements (2i, 2i+1) of row t; each pair (x0, x1) =
// (2i, 2i+1) of a query or key head (never a value head) is rotated in float:
//   forward  (rope_forward_kernel1):          (x0*cos - x1*sin, x0*sin + x1*cos)
//   backward (rope_backward_inplace_kernel1): (x0*cos + x1*sin, -x0*sin + x1*cos), the transpose.
// A word of N elements (N even, HD % N == 0) holds N/2 whole pairs, and its freqs_cis word is the
// word at the same offset d of row t: freqs word t*hdv + d. freqs_cis is read by every head of every
// sequence, so it is always loaded through the read-only path (__ldg), whatever the LOAD hint.
template <bool BACKWARD, typename T, int VEC_BYTES>
__device__ __forceinline__ void rope_rotate(float (&x)[Vec<T, VEC_BYTES>::N],
                                            const typename Vec<T, VEC_BYTES>::W* freqs) {
    constexpr int N = Vec<T, VEC_BYTES>::N;
    static_assert(N % 2 == 0, "a word must hold whole (x0, x1) pairs");
    const auto fw = load_word<1>(freqs);
    T f[N];
    memcpy(f, &fw, sizeof(fw));
#pragma unroll
    for (int i = 0; i < N; i += 2) {
        const float c = to_float(f[i]);
        const float s = to_float(f[i + 1]);
        const float x0 = x[i];
        const float x1 = x[i + 1];
        if constexpr (BACKWARD) {
            x[i] = x0 * c + x1 * s;
            x[i + 1] = -x0 * s + x1 * c;
        } else {
            x[i] = x0 * c - x1 * s;
            x[i + 1] = x0 * s + x1 * c;
        }
    }
}

// One word rotated: unpacked to float, rotated, rounded once to T.
template <bool BACKWARD, typename T, int VEC_BYTES>
__device__ __forceinline__ typename Vec<T, VEC_BYTES>::W rope_word(typename Vec<T, VEC_BYTES>::W w,
                                                                   const typename Vec<T, VEC_BYTES>::W* freqs) {
    float x[Vec<T, VEC_BYTES>::N] = {};
    Vec<T, VEC_BYTES>::accumulate(x, w);
    rope_rotate<BACKWARD, T, VEC_BYTES>(x, freqs);
    return Vec<T, VEC_BYTES>::pack(x);
}
