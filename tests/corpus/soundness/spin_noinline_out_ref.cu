// mutation of spin_noinline_poll.cu: the helper returns the polled status through a reference,
// which lives in the kernel's local memory, not through its result
__device__ __noinline__ void poll_status(const volatile int* flag, int& status) { status = *flag; }
extern "C" __global__ void wait_out_ref(const int* flag, float* out) {
    int status = 0;
    do {
        poll_status(flag, status);  // expect: PC306
    } while (status == 0);
    out[threadIdx.x] = 1.0f;
}
