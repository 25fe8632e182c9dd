// a helper header in a subfolder, inlined into the kernel
__device__ inline void add_to(float* total, float v) {
    atomicAdd(total, v);  // note: PC305
}
