extern "C" __global__ void sum_acquire(const int* x, int* out, int n) {
    int acc = 0;
    for (int i = 0; i < n; ++i) {
        int v;
        asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(v) : "l"(x + i) : "memory");
        acc += v;
    }
    out[blockIdx.x] = acc;
}
