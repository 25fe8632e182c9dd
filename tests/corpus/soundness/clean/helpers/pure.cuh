__device__ inline float squared(float v) { return v * v; }
