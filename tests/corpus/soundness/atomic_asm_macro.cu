#define STR(x) #x
#define RED(op, type) "red.global." STR(op) "." STR(type) " [%0], %1;"
extern "C" __global__ void asm_macro(unsigned int* total, unsigned int v) {
    asm volatile("mov.u32 %1, %1;" RED(add, u32) :: "l"(total), "r"(v) : "memory");  // expect: PC305
}
