__device__ __noinline__ void wait_for(volatile int* flag) {
    while (*flag == 0) {  // note: PC306
    }
}
extern "C" __global__ void spin_helper(volatile int* flag, float* out) {
    wait_for(flag);  // expect: PC306
    out[threadIdx.x] = 1.0f;
}
