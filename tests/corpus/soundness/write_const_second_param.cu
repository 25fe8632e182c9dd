// only the parameter written is reported: `a` stays read-only
extern "C" __global__ void second_written(const float* a, const float* b, float* out) {
    out[threadIdx.x] = a[threadIdx.x];
    ((float*)b)[threadIdx.x] = 0.0f;  // expect: PC318
}
