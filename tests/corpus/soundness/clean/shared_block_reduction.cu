// clean twin of spin_shared_copy.cu: a loop over tiles that loads global data and accumulates,
// then a block reduction through shared memory; every exit is a counter bounded by a
// parameter or the block size, and none depends on what was loaded
extern "C" __global__ void tile_sums(const float* x, float* out, int tiles) {
    __shared__ float partial[256];
    float acc = 0.0f;
    for (int t = 0; t < tiles; ++t) acc += x[t * blockDim.x + threadIdx.x];
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = partial[0];
}
