// mutation of spin_noinline_helper.cu: only the read is in the helper, the loop in the kernel
__device__ __noinline__ int poll(const volatile int* flag) { return *flag; }
extern "C" __global__ void spin_poll_helper(const int* flag, float* out) {
    while (poll(flag) == 0) {  // expect: PC306
    }
    out[threadIdx.x] = 1.0f;
}
