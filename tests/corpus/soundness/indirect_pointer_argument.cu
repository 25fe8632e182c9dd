// the function pointer arrives from outside the module: nothing can be said about it
typedef void (*op_t)(float*);
extern "C" __global__ void via_argument(float* x, unsigned long long op) {
    ((op_t)op)(x + threadIdx.x);  // expect: PC317
}
