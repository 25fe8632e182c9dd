extern "C" __global__ void spin_break(volatile int* flag, float* out) {
    for (;;) {
        if (*flag != 0) break;  // expect: PC306
    }
    out[threadIdx.x] = 1.0f;
}
