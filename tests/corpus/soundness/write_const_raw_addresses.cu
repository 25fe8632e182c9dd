// a store through an address read from a plain buffer may land in the const input
extern "C" __global__ void scatter_raw(const float* x, const unsigned long long* addresses) {
    reinterpret_cast<float*>(addresses[blockIdx.x])[threadIdx.x] = x[threadIdx.x];  // expect: PC318
}
