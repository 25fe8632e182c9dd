// mutation of spin_syncthreads_and.cu: __syncthreads_count of a flag thread 0 reads
extern "C" __global__ void wait_count(volatile const int* flag, float* out) {
    int seen = 0;
    while (__syncthreads_count(seen != 0) == 0) {  // expect: PC306
        if (threadIdx.x == 0) seen = *flag;  // expect: PC306
    }
    out[threadIdx.x] = 1.0f;
}
