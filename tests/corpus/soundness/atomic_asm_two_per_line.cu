extern "C" __global__ void asm_two(unsigned int* total, unsigned int v) {
    asm volatile("add.u32 %1, %1, 1; red.global.add.u32 [%0], %1;" :: "l"(total), "r"(v) : "memory");  // expect: PC305
}
