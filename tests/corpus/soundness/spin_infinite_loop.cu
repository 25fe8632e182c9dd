// a plain flag the compiler may read once: if it is zero, the loop never ends
extern "C" __global__ void spin_plain(const int* flag, float* out) {
    while (*flag == 0) {  // expect: PC306
    }
    out[threadIdx.x] = 1.0f;
}
