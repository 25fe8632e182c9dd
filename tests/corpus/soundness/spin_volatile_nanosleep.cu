extern "C" __global__ void spin_nanosleep(volatile int* flag, float* out) {
    while (*flag == 0) __nanosleep(100);  // expect: PC306
    out[threadIdx.x] = 1.0f;
}
