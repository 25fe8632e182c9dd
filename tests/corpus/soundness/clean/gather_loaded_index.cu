// the index comes from memory, the pointer does not: a gather writes only `out`
extern "C" __global__ void scatter(const int* idx, const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[idx[i]] = x[i];
}
