// a __noinline__ helper loads through an address it reads from its argument
#include "helpers/reads_noinline.cuh"
extern "C" __global__ void load_via_call(const unsigned long long* addresses, float* out) {
    out[threadIdx.x] = load_noinline(addresses, threadIdx.x);  // expect: PC324
}
