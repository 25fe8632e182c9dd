// the store happens on one path only: on the other the load reads what y held
/// pipec: out y
extern "C" __global__ void store_if(float* y, const float* x, int c) {
    int i = threadIdx.x;
    if (c) y[i] = x[i];
    __syncthreads();
    y[i] = y[i] * 2.0f;  // expect: PC404
}
