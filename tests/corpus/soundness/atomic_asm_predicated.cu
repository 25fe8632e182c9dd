extern "C" __global__ void asm_predicated(unsigned int* total, unsigned int v) {
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.u32 p, %1, 0;\n\t@p red.global.max.u32 [%0], %1;\n\t}"
                 :: "l"(total), "r"(v) : "memory");  // expect: PC305
}
