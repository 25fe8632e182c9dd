#include "helpers/noinline_ops.cuh"
extern "C" __global__ void flags(unsigned int* total, int n) {
    if (threadIdx.x < n) add_noinline(total, 1u << threadIdx.x);  // expect: PC305
}
