// the atomic is the finding; the loop it ends is no wait: thread 0 takes the next tile with
// atomicAdd and shares it, and each atomicAdd moves the counter it reads, so the block ends
// once the tiles run out, whatever other blocks do
extern "C" __global__ void work_queue(int* next_tile, float* out, int tiles) {
    __shared__ int tile;
    while (true) {
        if (threadIdx.x == 0) tile = atomicAdd(next_tile, 1);  // expect: PC305
        __syncthreads();
        if (tile >= tiles) break;
        out[tile * blockDim.x + threadIdx.x] = 1.0f;
        __syncthreads();
    }
}
