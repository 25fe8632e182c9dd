// a store through a pointer read from memory could reach any buffer: unknown, so reported
__device__ float* scratch_table[4];
extern "C" __global__ void through_table(const float* x, int slot) {
    scratch_table[slot & 3][threadIdx.x] = x[threadIdx.x];  // expect: PC318
}
