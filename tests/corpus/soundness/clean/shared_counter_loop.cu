// clean twin of spin_shared_copy.cu: the block loops on a counter kept in shared memory, which
// thread 0 advances every iteration; the exit depends on the counter's own previous value
extern "C" __global__ void shared_rounds(const float* x, float* out, int rounds) {
    __shared__ int round;
    if (threadIdx.x == 0) round = 0;
    __syncthreads();
    while (true) {
        int r = round;
        if (r >= rounds) break;
        out[r * blockDim.x + threadIdx.x] = x[r];
        __syncthreads();
        if (threadIdx.x == 0) round = r + 1;
        __syncthreads();
    }
}
