// a pointer read from a __device__ variable: set by someone else, it may point anywhere
__device__ const float* sources[4];
extern "C" __global__ void gather_from_device_table(float* out, int slot) {
    out[threadIdx.x] = sources[slot & 3][threadIdx.x];  // expect: PC324
}
