extern "C" __global__ void spin_acquire(const int* flag, float* out) {
    int v;
    do {
        asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(v) : "l"(flag) : "memory");  // expect: PC306
    } while (v == 0);
    out[threadIdx.x] = 1.0f;
}
