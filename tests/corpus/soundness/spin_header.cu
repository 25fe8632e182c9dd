#include "helpers/waits.cuh"
extern "C" __global__ void spin_header(volatile unsigned int* flag, float* out) {
    if (blockIdx.x > 0) wait_nonzero(flag);  // expect: PC306
    out[threadIdx.x] = 1.0f;
}
