extern "C" __global__ void asm_store(const float* x, float v) {
    asm volatile("st.global.f32 [%0], %1; st.global.f32 [%0+4], %1;" :: "l"(x), "f"(v) : "memory");  // expect: PC318
}
