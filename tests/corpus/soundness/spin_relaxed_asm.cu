__device__ __forceinline__ int load_relaxed(const int* p) {
    int v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");  // note: PC306
    return v;
}
extern "C" __global__ void spin_relaxed(const int* flag, float* out) {
    while (load_relaxed(flag) == 0) {  // expect: PC306
    }
    out[threadIdx.x] = 1.0f;
}
