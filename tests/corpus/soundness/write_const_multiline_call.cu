__device__ __noinline__ void put(float* p, int a, int b, int c, int d, int e, float v) {
    p[a + b + c + d + e] = v;  // note: PC318
}
extern "C" __global__ void const_many(const float* x, int n) {
    put((float*)x, n, 1, 2, 3, 4, 5.0f);  // expect: PC318
}
