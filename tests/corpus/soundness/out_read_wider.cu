// four bytes stored, eight read back: the other four were never written by this thread
/// pipec: out y
extern "C" __global__ void store_narrow_read_wide(float* y, float2* z) {
    int i = threadIdx.x;
    y[2 * i] = 1.0f;
    __syncthreads();
    z[i] = reinterpret_cast<const float2*>(y)[i];  // expect: PC404
}
