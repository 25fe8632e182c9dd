#define STR(x) #x
#define ADD(type) "add." STR(type) " %0, %1, %2;"
extern "C" __global__ void macro_add(unsigned int* out, unsigned int a, unsigned int b) {
    unsigned int r;
    asm(ADD(u32) ADD(u32) : "=r"(r) : "r"(a), "r"(b));
    out[threadIdx.x] = r;
}
