__device__ __noinline__ void clear(float* p, int i) { p[i] = 0.0f; }  // note: PC318
extern "C" __global__ void cast_helper(const float* x, float* y, int n) {
    int i = threadIdx.x;
    if (i < n) {
        y[i] = x[i];
        clear(const_cast<float*>(x), i);  // expect: PC318
    }
}
