#include "helpers/fences.cuh"
extern "C" __global__ void fence_header(float* out) {
    out[threadIdx.x] = 2.0f;
    system_fence();  // expect: PC307
}
