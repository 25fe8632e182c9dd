extern "C" __global__ void fence_asm(float* out) {
    out[threadIdx.x] = 1.0f;
    asm volatile("fence.acq_rel.gpu; membar.gl;" ::: "memory");  // expect: PC307
}
