#include "helpers/writes.cuh"
extern "C" __global__ void const_header(const float* x, float v) { overwrite(x, threadIdx.x, v); }  // expect: PC318
