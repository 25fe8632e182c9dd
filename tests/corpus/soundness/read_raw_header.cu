// the load through a loaded address sits in a header: reported at the kernel's line
#include "helpers/reads.cuh"
extern "C" __global__ void load_via_header(const unsigned long long* addresses, float* out) {
    out[threadIdx.x] = load_at(addresses[1], threadIdx.x);  // expect: PC324
}
