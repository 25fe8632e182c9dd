// A call through a function pointer whose every possible target is clean (PC317 silent).
__device__ __noinline__ void add_plain(float* p, float v) { *p += v; }
__device__ __noinline__ void add_scaled(float* p, float v) { *p += 2.0f * v; }

__device__ void (*clean_ops[2])(float*, float) = {add_plain, add_scaled};

extern "C" __global__ void apply_clean_op(float* x, int op, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) clean_ops[op & 1](x + i, 1.0f);
}
