typedef float (*op_t)(float);
__device__ __noinline__ float twice(float v) { return 2.0f * v; }
__device__ __noinline__ float half(float v) { return 0.5f * v; }
extern "C" __global__ void via_select(const float* x, float* y, int op) {
    op_t f = op ? twice : half;
    y[threadIdx.x] = f(x[threadIdx.x]);
}
