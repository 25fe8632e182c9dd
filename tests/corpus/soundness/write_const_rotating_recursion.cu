// A recursion that rotates its pointer arguments: the store through `e` reaches the kernel's
// `x`, passed as `d`, four calls down.
__device__ __noinline__ void rotate(float* a, float* b, float* c, float* d, float* e, int n) {
    if (n <= 0) { e[0] = 1.0f; return; }  // note: PC318
    rotate(b, c, d, e, a, n - 1);
}
extern "C" __global__ void rotating(float* y, const float* x, float* z, float* w, float* v, int n) {
    rotate(y, z, w, (float*)x, v, n);  // expect: PC318
}
