extern "C" __global__ void asm_select(unsigned int* out, unsigned int v) {
    unsigned int r = 0;
    asm("{ .reg .pred p; setp.ne.u32 p, %1, 0; @p add.u32 %0, %1, 5; }" : "+r"(r) : "r"(v));
    out[threadIdx.x] = r;
}
