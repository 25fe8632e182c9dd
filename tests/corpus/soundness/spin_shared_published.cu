// mutation of spin_shared_copy.cu: a helper that is not inlined polls the flag and publishes
// it into dynamic shared memory; the call writes what the block loops on
extern __shared__ int slots[];
__device__ __noinline__ void publish(int* slot, const volatile int* flag) { *slot = *flag; }
extern "C" __global__ void wait_published(const int* flag, float* out) {
    do {
        if (threadIdx.x == 0) publish(&slots[1], flag);  // expect: PC306
        __syncthreads();
    } while (slots[1] == 0);
    out[threadIdx.x] = 1.0f;
}
