// mutation of spin_noinline_poll.cu: the helper reads with a plain load, not a volatile one;
// the call is re-made every iteration all the same, and only another block can end the loop
__device__ __noinline__ int peek(const int* p) { return *p; }
extern "C" __global__ void spin_peek(const int* flag, float* out) {
    while (peek(flag) == 0) {  // expect: PC306
    }
    out[threadIdx.x] = 1.0f;
}
