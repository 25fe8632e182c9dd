extern "C" __global__ void warp_sum(const float* x, float* out) {
    float v = x[threadIdx.x];
    for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) out[threadIdx.x / 32] = v;
}
