__device__ __noinline__ void copy(const float* src, float* dst, int n) {
    for (int i = 0; i < n; ++i) dst[i] = src[i];
}
extern "C" __global__ void copy_rows(const float* x, float* y, int n) { copy(x, y, n); }
