extern "C" __global__ void cast_away(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = x[i];
        ((float*)x)[i] = 0.0f;  // expect: PC318
    }
}
