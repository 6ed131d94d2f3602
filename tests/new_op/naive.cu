// copy_op: the test's own op, a plain copy (out = inp), one thread per element. It exists to
// show that an op arrives as a descriptor and one template (tests/new_op/test_new_op.py).
template <typename T>
__global__ void copy_op_naive(T* out, const T* inp, int B, int T_, int NH, int NH_KV, int HD) {
    const long long n = (long long)B * T_ * (NH + 2 * NH_KV) * HD;
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = inp[i];
}
