// every load of y reads bytes the same thread stored before on every path: no read of what y held
/// pipec: out y
extern "C" __global__ void write_then_scale(float* y, const float* x, int c) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (c) y[i] = x[i]; else y[i] = 1.0f;
    __syncthreads();
    y[i] = y[i] * 2.0f;
}
/// pipec: out y
extern "C" __global__ void write_in_each_iteration(float* y, const float* x, int n) {
    for (int k = 0; k < n; k++) {
        y[threadIdx.x] = x[k];
        __syncthreads();
        y[threadIdx.x] += y[threadIdx.x];
    }
}
