extern "C" __global__ void const_arith(const float* x, int offset, int stride) {
    float* p = (float*)x + offset;
    p += stride * threadIdx.x;
    p[3] = 1.0f;  // expect: PC318
}
