__device__ inline void add_to(float* p, int i, float v) {
    p[i] += v;  // note: PC404
}
