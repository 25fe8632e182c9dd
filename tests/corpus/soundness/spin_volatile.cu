extern "C" __global__ void spin_volatile(volatile int* flag, float* out) {
    while (*flag == 0) {  // expect: PC306
    }
    out[threadIdx.x] = 1.0f;
}
