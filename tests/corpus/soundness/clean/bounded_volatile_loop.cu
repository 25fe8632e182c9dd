// reads volatile memory in a loop whose exit depends only on the counter
extern "C" __global__ void sum_volatile(volatile const int* x, int* out, int n) {
    int acc = 0;
    for (int i = 0; i < n; ++i) acc += x[i];
    out[blockIdx.x] = acc;
}
