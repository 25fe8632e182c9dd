__device__ __noinline__ void many(int* c, int a, int b, int d, int e, int f, int g, int h) {
    atomicSub(c, a + b + d + e + f + g + h);  // note: PC305
}
extern "C" __global__ void call_many(int* c, int n) {
    many(c, n, n + 1, n + 2, n + 3, n + 4, n + 5, n + 6);  // expect: PC305
}
