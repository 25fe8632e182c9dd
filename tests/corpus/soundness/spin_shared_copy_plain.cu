// mutation of spin_shared_copy.cu: thread 0 reads the flag with a plain load, which the barrier
// makes it re-read every iteration; no counter takes part in the exit, so only another block
// can end the loop
extern "C" __global__ void wait_shared_plain(const int* flag, float* out) {
    __shared__ int seen;
    do {
        if (threadIdx.x == 0) seen = *flag;  // expect: PC306
        __syncthreads();
    } while (seen == 0);
    out[threadIdx.x] = 1.0f;
}
