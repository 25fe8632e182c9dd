extern "C" __global__ void read_once(volatile const int* flag, float* out) {
    if (*flag != 0) out[threadIdx.x] = 1.0f;
}
