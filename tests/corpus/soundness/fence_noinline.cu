__device__ __noinline__ void publish(float* out, float v) {
    out[0] = v;
    __threadfence();  // note: PC307
}
extern "C" __global__ void fence_helper(float* out, float v) { publish(out, v); }  // expect: PC307
