// clean twin of spin_noinline_poll.cu: the helper reads volatile memory, a counter ends the loop
__device__ __noinline__ int poll(const volatile int* flag) { return *flag; }
extern "C" __global__ void sum_polls(const int* flag, int* out, int n) {
    int acc = 0;
    for (int i = 0; i < n; ++i) acc += poll(flag);
    out[blockIdx.x] = acc;
}
