// mutation of clean/gather_loaded_index.cu: the polled address is itself read from memory,
// the same address every iteration (no counter), so only another block can end the loop
extern "C" __global__ void spin_indexed(const int* idx, const int* data, float* out) {
    while (data[idx[0]] == 0) {  // expect: PC306
    }
    out[threadIdx.x] = 1.0f;
}
