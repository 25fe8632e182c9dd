// clean twin of spin_syncthreads_and.cu: thread 0 reads the lock through an acquire load and
// the block agrees through __syncthreads_and, but once per tile of a loop a parameter bounds,
// and what it read only decides whether the tile is skipped
extern "C" __global__ void gated_tiles(const int* gates, float* out, int tiles) {
    for (int t = 0; t < tiles; ++t) {
        int gate = 0;
        if (threadIdx.x == 0) asm volatile("ld.global.acquire.gpu.b32 %0, [%1];" : "=r"(gate) : "l"(gates + t));
        if (__syncthreads_and(gate == 0)) continue;
        out[t * blockDim.x + threadIdx.x] += 1.0f;
    }
}
