typedef void (*op_t)(float*, float);
__device__ __noinline__ void keep(float* p, float v) { *p = v; }
__device__ __noinline__ void fenced(float* p, float v) { *p = v; __threadfence(); }
extern "C" __global__ void via_select(float* x, int op) {
    op_t f = op ? keep : fenced;
    f(x + threadIdx.x, 1.0f);  // expect: PC317
}
