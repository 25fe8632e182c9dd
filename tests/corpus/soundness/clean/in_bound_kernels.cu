// Kernels that are clean on their own; the pipelines beside clean/ bind their written
// parameters `in`, which PC318 reports.
__device__ __noinline__ void store_at(float* p, int i, float v) { p[i] = v; }
__device__ float* spill_table[2];

extern "C" __global__ void scale_in_place(float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = a * x[i];
}

extern "C" __global__ void store_via_helper(float* x, float v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) store_at(x, i, v);
}

extern "C" __global__ void store_via_asm(float* x, float v) {
    asm volatile("{ st.global.f32 [%0], %1; }" :: "l"(x + threadIdx.x), "f"(v) : "memory");
}

extern "C" __global__ void store_via_table(float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) spill_table[i & 1][i] = x[i] + y[i];
}

extern "C" __global__ void read_only(float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
