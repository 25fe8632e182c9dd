// a __noinline__ helper reads what the kernel was told it never reads
#include "helpers/accumulate.cuh"
/// pipec: out y
extern "C" __global__ void bump_out(float* y) {
    bump(y, threadIdx.x);  // expect: PC404
}
