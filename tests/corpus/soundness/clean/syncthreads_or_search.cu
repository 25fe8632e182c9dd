// clean twin of spin_syncthreads_or.cu: the block searches for a key, agreeing through
// __syncthreads_or whether any thread still has to look on; the index each thread reads
// moves every iteration, so the exit is bounded by the array, not by another block
extern "C" __global__ void block_find(const int* a, int key, int n, int* where) {
    int i = threadIdx.x;
    while (__syncthreads_or(i < n && a[i] != key)) i += blockDim.x;
    where[blockIdx.x * blockDim.x + threadIdx.x] = i;
}
