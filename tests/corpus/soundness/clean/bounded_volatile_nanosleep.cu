extern "C" __global__ void sample_volatile(volatile const int* x, int* out) {
    int acc = 0;
    for (int i = 0; i < 8; ++i) {
        acc += *x;
        __nanosleep(16);
    }
    out[blockIdx.x] = acc;
}
