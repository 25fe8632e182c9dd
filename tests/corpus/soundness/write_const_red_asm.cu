extern "C" __global__ void const_red(const unsigned int* x) {
    asm volatile("red.global.add.u32 [%0], 1;" :: "l"(x) : "memory");  // expect: PC305, PC318
}
