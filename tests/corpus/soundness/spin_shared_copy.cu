// a block-wide wait with no atomic: thread 0 polls the flag and copies it into shared memory,
// and the whole block loops on the copy; the loop's exit depends on the flag through shared
// memory, so the block waits for another block as surely as if every thread read it
extern "C" __global__ void wait_shared_copy(const int* flag, float* out) {
    __shared__ int seen;
    while (true) {
        if (threadIdx.x == 0) seen = *(volatile const int*)flag;  // expect: PC306
        __syncthreads();
        if (seen != 0) break;
        __syncthreads();
    }
    out[threadIdx.x] = 1.0f;
}
