typedef void (*wait_t)(volatile int*);
__device__ __noinline__ void no_wait(volatile int*) {}
__device__ __noinline__ void wait(volatile int* f) { while (*f == 0) {} }  // reached only through the pointer: PC317 names it
__device__ wait_t waits[2] = {no_wait, wait};
extern "C" __global__ void via_waits(volatile int* flag, int op, float* out) {
    waits[op & 1](flag);  // expect: PC317
    out[0] = 1.0f;
}
