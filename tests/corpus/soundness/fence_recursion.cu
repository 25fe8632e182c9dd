__device__ __noinline__ void flush(float* out, int depth) {
    if (depth == 0) { __threadfence(); return; }  // note: PC307
    out[depth] = 0.0f;
    flush(out, depth - 1);
}
extern "C" __global__ void fence_recursive(float* out, int depth) { flush(out, depth); }  // expect: PC307
