extern "C" __global__ void asm_braces(unsigned int* total) {
    asm volatile("{ .reg .u32 t; mov.u32 t, 1; red.global.add.u32 [%0], t; }" :: "l"(total) : "memory");  // expect: PC305
}
