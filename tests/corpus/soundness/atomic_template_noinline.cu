template <typename T>
__device__ __noinline__ void accumulate(T* total, T v) {
    atomicAdd(total, v);  // note: PC305
}
extern "C" __global__ void templated(double* total, const double* x) {
    accumulate(total, x[threadIdx.x]);  // expect: PC305
}
