__device__ __noinline__ void store(float* p) { *p = 1.0f; }  // note: PC318
__device__ __noinline__ void skip(float*) {}
__device__ void (*ops[2])(float*) = {store, skip};
extern "C" __global__ void const_indirect(const float* x, int op) { ops[op & 1]((float*)x); }  // expect: PC318
