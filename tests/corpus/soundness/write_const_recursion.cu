__device__ __noinline__ void zero(float* p, int n) {
    if (n <= 0) return;
    p[n - 1] = 0.0f;  // note: PC318
    zero(p, n - 1);
}
extern "C" __global__ void const_recursive(const float* x, int n) { zero((float*)x, n); }  // expect: PC318
