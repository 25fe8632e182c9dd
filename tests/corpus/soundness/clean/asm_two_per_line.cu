extern "C" __global__ void asm_math(unsigned int* out, unsigned int v) {
    unsigned int r;
    asm("add.u32 %0, %1, 1; mul.lo.u32 %0, %0, 3;" : "=r"(r) : "r"(v));
    out[threadIdx.x] = r;
}
