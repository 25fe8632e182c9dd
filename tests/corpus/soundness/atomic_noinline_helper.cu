// mutation of clean/pure_noinline_helper.cu: the helper counts with an atomic
__device__ __noinline__ void bump(int* counter, int v) {
    atomicAdd(counter, v);  // note: PC305
}
extern "C" __global__ void count(const float* x, int* counter, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && x[i] > 0.0f) bump(counter, 1);  // expect: PC305
}
