__device__ __noinline__ void keep(float* p, float v) { *p = v; }
__device__ __noinline__ void add(float* p, float v) { *p += v; }
__device__ void (*table[2])(float*, float) = {keep, add};
extern "C" __global__ void via_table(float* x, int op) { table[op & 1](x + threadIdx.x, 1.0f); }
