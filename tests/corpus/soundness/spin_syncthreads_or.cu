// mutation of spin_syncthreads_and.cu: thread 0 reads the flag with a plain load and the block
// agrees through __syncthreads_or; nothing counts, so the loop ends only when another block
// writes the flag (thread 0's loop at its load, the others' at the barrier reduction)
extern "C" __global__ void wait_or(const int* flag, float* out) {
    int seen = 0;
    while (__syncthreads_or(seen == 0)) {  // expect: PC306
        if (threadIdx.x == 0) seen = *flag;  // expect: PC306
    }
    out[threadIdx.x] = 1.0f;
}
