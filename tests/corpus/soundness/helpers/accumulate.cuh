__device__ __noinline__ void bump(float* p, int i) {
    p[i] += 1.0f;  // note: PC404
}
