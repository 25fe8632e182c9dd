// Kernels whose first access to y differs: one adds to what y holds, one writes before it
// reads back (PC401 asks the PTX which, whatever the binding says).
extern "C" __global__ void add_into(float* y, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += x[i];
}
extern "C" __global__ void set_then_double(float* y, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = x[i];
        __syncthreads();
        y[i] = 2.0f * y[i];
    }
}
