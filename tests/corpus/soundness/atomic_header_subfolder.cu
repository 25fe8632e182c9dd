#include "helpers/atomic_ops.cuh"
extern "C" __global__ void sum(const float* x, float* total, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) add_to(total, x[i]);  // expect: PC305
}
