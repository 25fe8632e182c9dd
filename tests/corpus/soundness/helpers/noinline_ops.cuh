__device__ __noinline__ void add_noinline(unsigned int* total, unsigned int v) {
    atomicOr(total, v);  // note: PC305
}
