__device__ __noinline__ int odd(int* c, int n);
__device__ __noinline__ int even(int* c, int n) { return n == 0 ? 1 : odd(c, n - 1); }
__device__ __noinline__ int odd(int* c, int n) {
    if (n == 0) return 0;
    atomicMax(c, n);  // note: PC305
    return even(c, n - 1);
}
extern "C" __global__ void parity(int* c, int n) { c[threadIdx.x + 1] = even(c, n); }  // expect: PC305
