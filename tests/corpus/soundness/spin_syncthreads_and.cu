// a serial split-K semaphore as GEMM libraries write it: thread 0 re-reads the lock with an
// acquire load, and the block learns the result through __syncthreads_and, with no atomic.
// Both loops of the wait are reported: thread 0's, at its load, and the other threads', at
// the barrier reduction that tells them
#include "helpers/semaphore.cuh"
extern "C" __global__ void split_k_serial(int* lock, float* out) {
    Semaphore semaphore(lock, threadIdx.x);
    semaphore.fetch();
    semaphore.wait(blockIdx.z);  // expect: PC306
    out[threadIdx.x] += 1.0f;
    semaphore.release(blockIdx.z + 1);
}
