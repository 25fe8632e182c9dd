__device__ __noinline__ float load_scaled(const float* p, int i, float a) { return a * p[i]; }
extern "C" __global__ void scale(const float* x, float* y, float a) {
    y[threadIdx.x] = load_scaled(x, threadIdx.x, a);
}
