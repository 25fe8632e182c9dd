// inline PTX loads through an address the kernel read from memory
extern "C" __global__ void load_via_asm(const unsigned long long* addresses, float* out) {
    float v;
    asm volatile("ld.global.f32 %0, [%1];" : "=f"(v) : "l"(addresses[0] + 4ull * threadIdx.x));  // expect: PC324
    out[threadIdx.x] = v;
}
