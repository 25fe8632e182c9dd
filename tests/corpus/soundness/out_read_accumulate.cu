// `out` says the kernel never reads y, but it adds to what y holds
/// pipec: out y
extern "C" __global__ void accumulate_out(float* y, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += x[i];  // expect: PC404
}
