extern "C" __global__ void copy_volatile(volatile const int* x, int* y, int n) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = x[i] + 1;
}
