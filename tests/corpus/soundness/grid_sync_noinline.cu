__device__ __forceinline__ unsigned int* grid_workspace() {
    unsigned int lo, hi;
    asm volatile("mov.u32 %0, %%envreg1;" : "=r"(lo));
    asm volatile("mov.u32 %0, %%envreg2;" : "=r"(hi));
    return (unsigned int*)(((unsigned long long)lo << 32) | hi);
}

__device__ __noinline__ void grid_barrier() {
    unsigned int* arrived = grid_workspace() + 1;
    if (threadIdx.x == 0) {
        unsigned int old = atomicAdd(arrived, 1u);  // note: PC319
        while (((old ^ *(volatile unsigned int*)arrived) & 0x80000000u) == 0) {
        }
    }
    __syncthreads();
}
extern "C" __global__ void grid_noinline(float* out) {
    out[blockIdx.x] = 1.0f;
    grid_barrier();  // expect: PC319
    out[blockIdx.x + 1] = 2.0f;
}
