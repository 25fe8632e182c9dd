// clean twin of spin_shared_copy_plain.cu: thread 0 copies each tile's length from global
// memory into shared memory and the block stops at an empty tile, but a counter bounded by a
// parameter takes part in the exit and moves the address it reads
extern "C" __global__ void ragged_tiles(const int* length, const float* x, float* out, int tiles) {
    __shared__ int tile_length;
    float acc = 0.0f;
    for (int t = 0; t < tiles; ++t) {
        if (threadIdx.x == 0) tile_length = length[t];
        __syncthreads();
        if (tile_length == 0) break;
        acc += x[t * blockDim.x + threadIdx.x];
        __syncthreads();
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
