__device__ __noinline__ void third(int* c) { atomicExch(c, 7); }  // note: PC305
__device__ __noinline__ void second(int* c) { third(c + 1); }
__device__ __noinline__ void first(int* c) { second(c + 1); }
extern "C" __global__ void chain(int* c) { first(c); }  // expect: PC305
