extern "C" __global__ void spin_asm_two(const unsigned int* flag, float* out) {
    unsigned int v;
    do {
        asm volatile("ld.volatile.global.u32 %0, [%1]; and.b32 %0, %0, 1;" : "=r"(v) : "l"(flag));  // expect: PC306
    } while (v == 0);
    out[threadIdx.x] = 1.0f;
}
