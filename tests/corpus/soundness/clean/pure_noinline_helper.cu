__device__ __noinline__ int positive(float v) { return v > 0.0f; }
extern "C" __global__ void count(const float* x, int* flags, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) flags[i] = positive(x[i]);
}
