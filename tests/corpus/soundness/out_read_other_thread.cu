// reading a neighbour's element after a barrier reads what that thread wrote; pipec tells
// elements apart per thread only, and reports it (conservatively)
/// pipec: out y
extern "C" __global__ void exchange(float* y, float* z, const float* x) {
    int i = threadIdx.x;
    y[i] = x[i];
    __syncthreads();
    z[i] = y[i ^ 1];  // expect: PC404
}
