extern "C" __global__ void fence_sc(float* out) {
    asm volatile("{ fence.sc.sys; }" ::: "memory");  // expect: PC307
    out[0] = 1.0f;
}
