// the poll lies outside the waiting loop: the first warp reads the flag a bounded number of
// times and leaves what it read in shared memory, while the other warps spin on the shared
// copy; their loop waits for another block through a thread of their own block
extern "C" __global__ void wait_other_warp(const int* flag, int tries, float* out) {
    __shared__ volatile int ready;
    if (threadIdx.x < 32) {
        for (int i = 0; i < tries; ++i)
            if (threadIdx.x == 0) ready = *(volatile const int*)flag;
    } else {
        while (ready == 0) {  // expect: PC306
        }
    }
    out[threadIdx.x] = 1.0f;
}
