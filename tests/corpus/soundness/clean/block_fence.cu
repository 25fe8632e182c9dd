extern "C" __global__ void block_fence(float* out) {
    out[threadIdx.x] = 1.0f;
    __threadfence_block();
    out[threadIdx.x + 1] = 2.0f;
}
