// clean twin of spin_syncthreads_count.cu: __syncthreads_count over data loaded from global
// memory, in a loop a parameter bounds; the counts are summed, the exit is the counter's
extern "C" __global__ void positive_counts(const float* x, int rounds, int* out) {
    int total = 0;
    for (int r = 0; r < rounds; ++r) total += __syncthreads_count(x[r * blockDim.x + threadIdx.x] > 0.0f);
    if (threadIdx.x == 0) out[blockIdx.x] = total;
}
