__device__ __forceinline__ unsigned int* grid_workspace() {
    unsigned int lo, hi;
    asm volatile("mov.u32 %0, %%envreg1;" : "=r"(lo));
    asm volatile("mov.u32 %0, %%envreg2;" : "=r"(hi));
    return (unsigned int*)(((unsigned long long)lo << 32) | hi);
}

// the grid barrier of cooperative_groups, as <cooperative_groups.h> 12.9 compiles it
extern "C" __global__ void grid_inline(float* out) {
    unsigned int* arrived = grid_workspace() + 1;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned int old, now;
        asm volatile("atom.add.release.gpu.u32 %0, [%1], 1;" : "=r"(old) : "l"(arrived) : "memory");  // expect: PC319
        do {
            asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(now) : "l"(arrived) : "memory");
        } while (((old ^ now) & 0x80000000u) == 0);
    }
    __syncthreads();
    out[blockIdx.x] = 1.0f;
}
